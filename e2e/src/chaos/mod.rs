//! The chaos suite (issue #6): seeded random operations on both sides of the sync, for all
//! five kinds, while faults hit the resources operator, the server and the kube-apiserver;
//! then an oracle says what every object must have become, and a check compares. See
//! `docs/chaos.md`.
//!
//! - [`rng`]: the seeded generator (SplitMix64);
//! - [`model`]: the objects (slots) and how content versions are written and read back;
//! - [`plan`]: profiles, operations and the gates that keep outcomes timing-independent,
//!   the fault schedule;
//! - [`oracle`]: the expected final state from the log of operations;
//! - [`check`]: the observed world against the expectation;
//! - [`world`]: issuing operations and observing both sides (I/O);
//! - [`apiserver`]: the testbed's kube-apiserver stopped and started again (I/O);
//! - [`driver`]: a whole run on the testbed (I/O).

pub mod apiserver;
pub mod check;
pub mod driver;
pub mod model;
pub mod oracle;
pub mod plan;
pub mod rng;
pub mod world;
