//! The one mapping between a [`ResourceKind`] (a CRD, `common-crds`) and the server's
//! [`EventKind`] (which events and feeds are about it, `infinispan-rest`, which knows nothing of
//! CRDs). Both enums stay: each is its crate's concept; this is the only place that pairs them.

use common_crds::ResourceKind;
use infinispan_rest::EventKind;

/// The server's event kind of a resource kind: the one mapping between the two (the server's
/// events and feeds are `infinispan-rest`'s concept, which knows nothing of CRDs).
pub const fn event_kind(kind: ResourceKind) -> EventKind {
    match kind {
        ResourceKind::Cache => EventKind::Cache,
        ResourceKind::Template => EventKind::Template,
        ResourceKind::Counter => EventKind::Counter,
        ResourceKind::Schema => EventKind::Schema,
        ResourceKind::Task => EventKind::Task,
    }
}

/// The resource kind of a server event kind ([`event_kind`] the other way).
pub const fn resource_kind(kind: EventKind) -> ResourceKind {
    match kind {
        EventKind::Cache => ResourceKind::Cache,
        EventKind::Template => ResourceKind::Template,
        EventKind::Counter => ResourceKind::Counter,
        EventKind::Schema => ResourceKind::Schema,
        EventKind::Task => ResourceKind::Task,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_server_event_kind() {
        let mut seen = Vec::new();
        for kind in ResourceKind::ALL {
            let event = event_kind(kind);
            assert_eq!(resource_kind(event), kind);
            assert!(!seen.contains(&event), "{kind}");
            seen.push(event);
        }
    }
}
