//! The labels and annotations a CR adds to the objects of its cluster (pure), from two routes:
//!
//! - its fields: `spec.service.podLabels` / `podAnnotations` (the server pods),
//!   `spec.service.serviceLabels` / `serviceAnnotations` (the cluster's Services `<name>`,
//!   `<name>-ping`, `<name>-operator`), `spec.service.clientService`, `pingService`,
//!   `operatorService` (one Service each), `spec.expose.labels` / `annotations` (the exposing
//!   Service or Ingress);
//! - infinispan-operator's annotations on the CR, for drop-in manifests: `infinispan.org/targetLabels`
//!   and `infinispan.org/targetAnnotations` name (comma-separated) keys of the CR's own labels
//!   and annotations copied to every Service and the exposing object,
//!   `infinispan.org/podTargetLabels` and `infinispan.org/podTargetAnnotations` to the pods. A
//!   key the CR does not carry, or with an empty value, is skipped, as there.
//!
//! On one object a field beats the annotation route, and a field of one Service beats
//! `serviceLabels` / `serviceAnnotations`. Nothing of this enters a selector (the builders
//! select by [`crate::build::server::selector_labels`] alone), and none of it may take the
//! operator's keys ([`common_crds::labels::is_reserved_label`], `is_reserved_annotation`): where
//! infinispan-operator let a CR label override the operator's, here the CR is refused
//! ([`ReservedKey`]; the CRD's CEL rules already refuse them in the fields).

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::ObjectMetadataSpec;
use common_crds::labels::{
    POD_TARGET_ANNOTATIONS_ANNOTATION, POD_TARGET_LABELS_ANNOTATION, TARGET_ANNOTATIONS_ANNOTATION,
    TARGET_LABELS_ANNOTATION, is_reserved_annotation, is_reserved_label, target_keys,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Labels and annotations added to one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Added {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl Added {
    /// `metadata` with these labels and annotations beside its own, which win (a reserved key
    /// never gets here, so none is lost); an empty map stays absent.
    pub fn apply_to(&self, metadata: &mut ObjectMeta) {
        metadata.labels = merged(&self.labels, metadata.labels.take());
        metadata.annotations = merged(&self.annotations, metadata.annotations.take());
    }
}

/// `added` with `own` over it; `None` when both are empty.
fn merged(
    added: &BTreeMap<String, String>,
    own: Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let mut all = added.clone();
    all.extend(own.unwrap_or_default());
    (!all.is_empty()).then_some(all)
}

/// What the CR adds to each of its cluster's objects that takes user metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserMetadata {
    /// The server pods (the StatefulSet's pod template).
    pub pods: Added,
    /// The client Service `<name>`.
    pub client_service: Added,
    /// The headless Service `<name>-ping`.
    pub ping_service: Added,
    /// The operators' Service `<name>-operator`.
    pub operator_service: Added,
    /// The Service or Ingress of `spec.expose`.
    pub exposing: Added,
    /// The ServiceMonitor (`spec.monitoring.serviceMonitorMetadata` only).
    pub service_monitor: Added,
}

/// The CR asks for one of the operator's keys on its objects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} asks for the {what} {key:?} on the cluster's objects, a key of the operator's own (app.kubernetes.io/name, instance, component, part-of, managed-by and the infinispan.org/ domain select the pods or name the objects): remove it"
)]
pub struct ReservedKey {
    /// Where it comes from (`spec.service.podLabels`,
    /// `metadata.annotations[infinispan.org/podTargetLabels]`...).
    pub field: String,
    /// `label` or `annotation`.
    pub what: &'static str,
    pub key: String,
}

/// What `cluster` adds to each object, or the first of the operator's keys it asks for.
pub fn of(cluster: &Infinispan) -> Result<UserMetadata, ReservedKey> {
    let service = &cluster.spec.service;
    let route = |annotation: &str, check: Check| {
        check(&targeted(cluster, annotation), &target_field(annotation))
    };
    let target_labels = route(TARGET_LABELS_ANNOTATION, labels)?;
    let target_annotations = route(TARGET_ANNOTATIONS_ANNOTATION, annotations)?;
    let service_labels = labels(&service.service_labels, "spec.service.serviceLabels")?;
    let service_annotations = annotations(
        &service.service_annotations,
        "spec.service.serviceAnnotations",
    )?;
    // One of the cluster's Services: the annotation route, then every Service's, then its own.
    let one_service = |own: &ObjectMetadataSpec, field: &str| {
        Ok::<_, ReservedKey>(Added {
            labels: layered([
                &target_labels,
                &service_labels,
                &labels(&own.labels, &format!("{field}.labels"))?,
            ]),
            annotations: layered([
                &target_annotations,
                &service_annotations,
                &annotations(&own.annotations, &format!("{field}.annotations"))?,
            ]),
        })
    };
    let pods = Added {
        labels: layered([
            &route(POD_TARGET_LABELS_ANNOTATION, labels)?,
            &labels(&service.pod_labels, "spec.service.podLabels")?,
        ]),
        annotations: layered([
            &route(POD_TARGET_ANNOTATIONS_ANNOTATION, annotations)?,
            &annotations(&service.pod_annotations, "spec.service.podAnnotations")?,
        ]),
    };
    let none = BTreeMap::new();
    let (expose_labels, expose_annotations) = cluster
        .spec
        .expose
        .as_ref()
        .map_or((&none, &none), |expose| {
            (&expose.labels, &expose.annotations)
        });
    let exposing = Added {
        labels: layered([
            &target_labels,
            &labels(expose_labels, "spec.expose.labels")?,
        ]),
        annotations: layered([
            &target_annotations,
            &annotations(expose_annotations, "spec.expose.annotations")?,
        ]),
    };
    let monitor = &cluster.spec.monitoring.service_monitor_metadata;
    let service_monitor = Added {
        labels: labels(
            &monitor.labels,
            "spec.monitoring.serviceMonitorMetadata.labels",
        )?,
        annotations: annotations(
            &monitor.annotations,
            "spec.monitoring.serviceMonitorMetadata.annotations",
        )?,
    };
    Ok(UserMetadata {
        pods,
        client_service: one_service(&service.client_service, "spec.service.clientService")?,
        ping_service: one_service(&service.ping_service, "spec.service.pingService")?,
        operator_service: one_service(&service.operator_service, "spec.service.operatorService")?,
        exposing,
        service_monitor,
    })
}

/// The labels (for a `*Labels` annotation) or annotations (`*Annotations`) of the CR itself
/// that its target annotation `annotation` names, with their trimmed values; keys it lacks or
/// with an empty value are skipped.
pub fn targeted(cluster: &Infinispan, annotation: &str) -> BTreeMap<String, String> {
    let annotations = cluster.metadata.annotations.clone().unwrap_or_default();
    let Some(list) = annotations.get(annotation) else {
        return BTreeMap::new();
    };
    let source = if annotation.ends_with("Labels") {
        cluster.metadata.labels.clone().unwrap_or_default()
    } else {
        annotations.clone()
    };
    target_keys(list)
        .filter_map(|key| {
            let value = source.get(key)?.trim();
            (!value.is_empty()).then(|| (key.to_string(), value.to_string()))
        })
        .collect()
}

/// How a [`ReservedKey`] names the annotation route of `annotation`.
fn target_field(annotation: &str) -> String {
    format!("metadata.annotations[{annotation}]")
}

/// The maps merged, each over the ones before it.
fn layered<const N: usize>(maps: [&BTreeMap<String, String>; N]) -> BTreeMap<String, String> {
    maps.into_iter()
        .flat_map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect()
}

/// A check of a map of labels or annotations from `field`.
type Check = fn(&BTreeMap<String, String>, &str) -> Result<BTreeMap<String, String>, ReservedKey>;

/// `map` as labels, unless one of its keys is the operator's.
fn labels(
    map: &BTreeMap<String, String>,
    field: &str,
) -> Result<BTreeMap<String, String>, ReservedKey> {
    checked(map, field, "label", is_reserved_label)
}

/// `map` as annotations, unless one of its keys is the operator's.
fn annotations(
    map: &BTreeMap<String, String>,
    field: &str,
) -> Result<BTreeMap<String, String>, ReservedKey> {
    checked(map, field, "annotation", is_reserved_annotation)
}

fn checked(
    map: &BTreeMap<String, String>,
    field: &str,
    what: &'static str,
    reserved: fn(&str) -> bool,
) -> Result<BTreeMap<String, String>, ReservedKey> {
    match map.keys().find(|key| reserved(key)) {
        Some(key) => Err(ReservedKey {
            field: field.to_string(),
            what,
            key: key.clone(),
        }),
        None => Ok(map.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::test_support::cluster;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn with_spec(spec: serde_json::Value) -> Infinispan {
        let mut cr = cluster("demo", "team-a", "uid-1");
        cr.spec = serde_json::from_value(spec).unwrap_or_else(|e| panic!("{e}"));
        cr
    }

    #[test]
    fn a_cr_without_any_adds_nothing() {
        let added = of(&cluster("demo", "team-a", "uid-1")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(added, UserMetadata::default());
        // And nothing changes the metadata it is applied to: no empty maps appear.
        let mut metadata = ObjectMeta::default();
        added.pods.apply_to(&mut metadata);
        assert_eq!(metadata, ObjectMeta::default());
    }

    #[test]
    fn each_field_reaches_its_objects_and_one_service_beats_every_service() {
        let cr = with_spec(json!({
            "service": {
                "podLabels": {"team": "shop"},
                "podAnnotations": {"sidecar.istio.io/inject": "false"},
                "serviceLabels": {"team": "shop", "tier": "cache"},
                "serviceAnnotations": {"note": "all"},
                "clientService": {"labels": {"monitor": "yes", "tier": "front"}},
                "pingService": {"annotations": {"note": "ping"}},
            },
            "expose": {"type": "LoadBalancer", "labels": {"public": "yes"},
                       "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}},
        }));
        let added = of(&cr).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(added.pods.labels, map(&[("team", "shop")]));
        assert_eq!(
            added.pods.annotations,
            map(&[("sidecar.istio.io/inject", "false")])
        );
        assert_eq!(
            added.client_service.labels,
            map(&[("monitor", "yes"), ("team", "shop"), ("tier", "front")])
        );
        assert_eq!(added.client_service.annotations, map(&[("note", "all")]));
        assert_eq!(
            added.ping_service.labels,
            map(&[("team", "shop"), ("tier", "cache")])
        );
        assert_eq!(added.ping_service.annotations, map(&[("note", "ping")]));
        assert_eq!(added.operator_service.labels, added.ping_service.labels);
        assert_eq!(added.operator_service.annotations, map(&[("note", "all")]));
        // The exposing object takes spec.expose's only.
        assert_eq!(added.exposing.labels, map(&[("public", "yes")]));
        assert_eq!(
            added.exposing.annotations,
            map(&[("service.beta.kubernetes.io/aws-load-balancer-type", "nlb")])
        );
    }

    /// infinispan-operator's example (`custom_labels.yaml`, `custom_annotations.yaml`).
    #[test]
    fn the_target_annotations_copy_the_crs_own_labels_and_annotations() {
        let mut cr = with_spec(json!({"expose": {"type": "NodePort"}}));
        cr.metadata.labels = Some(map(&[
            ("svc-label1", "svc-value1"),
            ("svc-label2", "svc-value2"),
            ("pod-label1", " pod-value1 "),
            ("pod-label2", "pod-value2"),
            ("my-label", "my-value"),
            ("empty", " "),
        ]));
        cr.metadata.annotations = Some(map(&[
            (TARGET_LABELS_ANNOTATION, "svc-label1, svc-label2"),
            (
                POD_TARGET_LABELS_ANNOTATION,
                "pod-label1,pod-label2, missing, empty",
            ),
            (TARGET_ANNOTATIONS_ANNOTATION, "service-annotation1"),
            (POD_TARGET_ANNOTATIONS_ANNOTATION, "pod-annotation1,"),
            ("service-annotation1", "value"),
            ("pod-annotation1", "value"),
        ]));
        let added = of(&cr).unwrap_or_else(|e| panic!("{e}"));
        let services = map(&[("svc-label1", "svc-value1"), ("svc-label2", "svc-value2")]);
        for service in [
            &added.client_service,
            &added.ping_service,
            &added.operator_service,
            &added.exposing,
        ] {
            assert_eq!(service.labels, services);
            assert_eq!(
                service.annotations,
                map(&[("service-annotation1", "value")])
            );
        }
        assert_eq!(
            added.pods.labels,
            map(&[("pod-label1", "pod-value1"), ("pod-label2", "pod-value2")])
        );
        assert_eq!(added.pods.annotations, map(&[("pod-annotation1", "value")]));

        // A field beats the annotation route on the same key.
        cr.spec.service.pod_labels = map(&[("pod-label1", "field")]);
        let added = of(&cr).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            added.pods.labels.get("pod-label1").map(String::as_str),
            Some("field")
        );
    }

    #[test]
    fn the_operators_keys_are_refused_whatever_the_route() {
        let refused = |cr: &Infinispan| of(cr).err().unwrap_or_else(|| panic!("accepted"));
        let error = refused(&with_spec(
            json!({"service": {"podLabels": {"app.kubernetes.io/instance": "other"}}}),
        ));
        assert_eq!(error.field, "spec.service.podLabels");
        assert_eq!(error.key, "app.kubernetes.io/instance");
        assert!(error.to_string().contains("remove it"), "{error}");
        let error = refused(&with_spec(
            json!({"service": {"clientService": {"annotations": {"infinispan.org/config-hash": "x"}}}}),
        ));
        assert_eq!(error.field, "spec.service.clientService.annotations");
        let error = refused(&with_spec(
            json!({"expose": {"type": "Ingress", "labels": {"infinispan.org/cluster": "x"}}}),
        ));
        assert_eq!(error.field, "spec.expose.labels");

        let mut cr = cluster("demo", "team-a", "uid-1");
        cr.metadata.labels = Some(map(&[("app.kubernetes.io/name", "mine")]));
        cr.metadata.annotations = Some(map(&[(
            POD_TARGET_LABELS_ANNOTATION,
            "app.kubernetes.io/name",
        )]));
        let error = refused(&cr);
        assert_eq!(
            error.field,
            "metadata.annotations[infinispan.org/podTargetLabels]"
        );
        assert_eq!(error.what, "label");
        // Free keys of the app.kubernetes.io/ set pass.
        cr.metadata.labels = Some(map(&[("app.kubernetes.io/version", "1")]));
        cr.metadata.annotations = Some(map(&[(
            POD_TARGET_LABELS_ANNOTATION,
            "app.kubernetes.io/version",
        )]));
        assert!(of(&cr).is_ok());
    }

    #[test]
    fn applied_metadata_keeps_the_operators_own_labels() {
        let added = Added {
            labels: map(&[("team", "shop"), ("app.kubernetes.io/name", "evil")]),
            annotations: map(&[("note", "x")]),
        };
        let mut metadata = ObjectMeta {
            labels: Some(map(&[("app.kubernetes.io/name", "infinispan")])),
            ..ObjectMeta::default()
        };
        added.apply_to(&mut metadata);
        assert_eq!(
            metadata.labels,
            Some(map(&[
                ("app.kubernetes.io/name", "infinispan"),
                ("team", "shop")
            ]))
        );
        assert_eq!(metadata.annotations, Some(map(&[("note", "x")])));
    }
}
