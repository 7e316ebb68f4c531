//! The generic sync engine (design "Shape of the code"): one engine for the five resource kinds,
//! each kind plugged in as a small adapter. Nothing here is specific to one kind.
//!
//! - [`decision`]: the pure function at its heart: given what is observed about one object (its
//!   CR, the server's current object, what was last synced) and the cluster's sync settings,
//!   what must happen. No I/O; unit- and property-tested.
//! - [`kind`]: the [`kind::KindAdapter`] trait a kind implements; [`server_kind`]: the one
//!   mapping of a resource kind to the server's event kind.
//! - [`controller`]: the CR watch, the per-key queue (kube-runtime's `Controller`) and the
//!   reconcile of one CR (observe, decide, execute, status).
//! - [`stream`]: the server's config event stream: the snapshot, reconcile triggers, and the
//!   server-only path that creates mirror CRs.
//! - [`epoch`]: the server's epoch (markers the operator keeps on the server) that tells a
//!   removal from a loss (design R2, removals only when proven; R3, a server that lost its state).
//! - [`catalog`]: the names of every server object, by kind, for dependencies (design D1).
//! - The engine's bookkeeping between reconciles, each a small type of its own:
//!   [`requests`] (the reconcile requests it sends, the `queue_depth` metric), [`waits`] (CRs
//!   waiting for a dependency, D1), [`comparisons`] (the memo of the server's comparisons),
//!   [`refusals`] (what the server refused, not sent again), [`unmirrorable`] (server objects
//!   whose mirror CR the API server refused, reported once, tried again on a slow clock),
//!   [`retries`] (server objects whose sync failed, tried again on a clock of their own), [`writes`] (store copies that
//!   predate our own writes; server events waiting for their CR write), [`loop_guard`] (holds an
//!   object another writer keeps fighting over: no endless loop); all behind [`locked`].
//! - [`order`]: bulk creation in design D1's order (`ResourceKind::ALL`: Schema, Template,
//!   Counter, Cache, Task).
//! - [`server_writes`]: how many writes go to the server at once (bounded, fewer while the
//!   server is slow).
//! - [`proto`]: the message types a schema declares (what indexed caches need, D1).
//! - [`comparing`]: how much of the server's comparison a decision needs.
//! - [`snapshot`]: what is known of the server's objects; [`claims`]: who stands for a server
//!   name; [`status`]: the status of a CR; [`digest`]: digests of server objects.

pub mod catalog;
pub mod claims;
pub mod compact;
pub mod comparing;
pub mod comparisons;
pub mod controller;
pub mod decision;
pub mod digest;
pub mod drift;
pub mod epoch;
pub mod kind;
pub mod locked;
pub mod loop_guard;
pub mod order;
pub mod proto;
pub mod refusals;
pub mod requests;
pub mod retries;
pub mod server_kind;
pub mod server_writes;
pub mod snapshot;
pub mod status;
pub mod stream;
pub mod unmirrorable;
pub mod waits;
pub mod writes;

/// What the engines of every kind share about the server: its epoch, the names it has, the
/// order of bulk creation, and the window of writes in flight.
#[derive(Debug, Clone, Default)]
pub struct ServerState {
    pub epoch: epoch::ServerEpoch,
    pub catalog: catalog::ServerCatalog,
    pub order: order::BulkOrder,
    pub writes: server_writes::ServerWrites,
}
