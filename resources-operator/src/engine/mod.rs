//! The generic sync engine (design "Shape of the code"): one engine for the five resource kinds,
//! each kind plugged in as a small adapter. Nothing here is specific to one kind.
//!
//! - [`decision`]: the pure function at its heart: given what is observed about one object (its
//!   CR, the server's current object, what was last synced) and the cluster's sync settings,
//!   what must happen. No I/O; unit- and property-tested.

pub mod decision;
