//! The kinds of configuration object the server's events and lists name: [`EventKind`].
//!
//! A module of its own so that both the events ([`crate::events`]) and the server's names list
//! ([`crate::server::ConfigNames`]) use it without depending on each other; re-exported as
//! `events::EventKind` and at the crate root.

/// The kind of a configuration object carried by an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Cache,
    Template,
    Schema,
    Counter,
    /// Server tasks (scripts): never on the config stream, see [`feeds`](crate::events::feeds).
    Task,
}
