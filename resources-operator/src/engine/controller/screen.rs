//! One unreadable CR never breaks the watch (style: `DeserializeGuard`). The CR watch reads
//! objects through kube's `DeserializeGuard`, so a CR the API server accepted but this operator
//! cannot read (possible when the schema is looser than the Rust type, or after a version skew)
//! becomes an error value instead of failing the whole list or watch. [`screen`] keeps readable
//! objects and sets the unreadable ones aside; the engine reports each (a log line, a Warning
//! Event on the CR, the `invalid_crs` metric) and keeps what it knew of it, if anything: nothing
//! is deleted because of it, and it is synced again once fixed.

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::watcher::Event;
use operator_runtime::events::Event as KubeEvent;

use super::Engine;
use crate::engine::kind::KindAdapter;

/// What screening one watch event gives: the event for the store (if any), and the unreadable
/// objects it carried.
pub(super) fn screen<K>(
    event: Event<DeserializeGuard<K>>,
) -> (Option<Event<K>>, Vec<InvalidObject>) {
    let mut invalid = Vec::new();
    let mut keep = |guard: DeserializeGuard<K>| match guard.0 {
        Ok(object) => Some(object),
        Err(error) => {
            invalid.push(error);
            None
        }
    };
    let event = match event {
        Event::Apply(guard) => keep(guard).map(Event::Apply),
        Event::Delete(guard) => keep(guard).map(Event::Delete),
        Event::InitApply(guard) => keep(guard).map(Event::InitApply),
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
    };
    (event, invalid)
}

impl<A: KindAdapter> Engine<A> {
    /// Reports a CR this operator cannot read.
    pub(super) async fn report_invalid(&self, invalid: InvalidObject) {
        let name = invalid.metadata.name.clone().unwrap_or_default();
        tracing::warn!(
            kind = self.kind(),
            cr = name,
            error = invalid.error,
            "a CR cannot be read: ignored until it is fixed"
        );
        self.metrics
            .invalid_crs
            .with_label_values(&[self.kind()])
            .inc();
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(A::Cr::api_version(&()).to_string()),
            kind: Some(A::Cr::kind(&()).to_string()),
            name: invalid.metadata.name.clone(),
            namespace: invalid.metadata.namespace.clone(),
            uid: invalid.metadata.uid.clone(),
            resource_version: invalid.metadata.resource_version.clone(),
            ..Default::default()
        };
        let event = KubeEvent {
            type_: kube::runtime::events::EventType::Warning,
            reason: "Unreadable".to_string(),
            note: Some(format!(
                "this CR cannot be read by the resources operator ({}); it is not synced until fixed",
                invalid.error
            )),
            action: "Read".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "cannot publish an Event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::Cache;
    use serde_json::json;

    fn guard(value: serde_json::Value) -> DeserializeGuard<Cache> {
        serde_json::from_value(value).expect("a guard always deserializes an object with metadata")
    }

    #[test]
    fn unreadable_objects_are_set_aside_and_the_rest_kept() {
        let good = guard(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
            "metadata": { "name": "good", "namespace": "ns" },
            "spec": { "template": "{}" }
        }));
        let bad = guard(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
            "metadata": { "name": "bad", "namespace": "ns" },
            "spec": { "template": 42, "deletionPolicy": "Sometimes" }
        }));
        let (event, invalid) = screen(Event::Apply(good));
        assert!(
            matches!(event, Some(Event::Apply(c)) if c.metadata.name.as_deref() == Some("good"))
        );
        assert!(invalid.is_empty());
        let (event, invalid) = screen(Event::InitApply(bad));
        assert!(event.is_none());
        assert_eq!(invalid.len(), 1);
        assert_eq!(invalid[0].metadata.name.as_deref(), Some("bad"));
        assert!(matches!(
            screen::<Cache>(Event::InitDone).0,
            Some(Event::InitDone)
        ));
    }
}
