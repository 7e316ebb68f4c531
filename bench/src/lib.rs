//! The resources operator's benchmark (issue #6): on the real testbed, for N caches, each time
//! beside its floor measured in the same run, latencies beside the API server's own, requests
//! counted outside the operator (the API server's audit log and priority-and-fairness counters,
//! a counting proxy in front of the Infinispan server), the operator's memory and CPU.
//!
//! The pure parts (statistics, parsing, matching, checks, report, chart) are unit-tested; `run`
//! drives the testbed.

pub mod apf;
pub mod audit;
pub mod chart;
pub mod figures;
pub mod handoffs;
pub mod httpcount;
pub mod machine;
pub mod matching;
pub mod procfs;
pub mod promtext;
pub mod report;
pub mod run;
pub mod stalls;
pub mod stats;
