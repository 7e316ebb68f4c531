//! The names of the server's objects and their labels: the StatefulSet, the client Service and
//! the PodDisruptionBudget are `<cluster>`, the headless Service `<cluster>-ping`, the operators'
//! Service `<cluster>-operator`, the ConfigMap `<cluster>-server-config`, the identities Secret
//! `<cluster>-server-identities`; the selector depends on the cluster name only.

use std::collections::BTreeMap;

use super::{APP_NAME, COMPONENT};
use crate::build::identity;

/// Name of the StatefulSet, the client Service and the PodDisruptionBudget of `cluster`.
pub fn stateful_set_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the client Service of `cluster`.
pub fn client_service_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the operators' Service of `cluster` (client-IP session affinity). At most 61
/// characters for a cluster name of [`MAX_CLUSTER_NAME_LEN`](super::MAX_CLUSTER_NAME_LEN),
/// within a Service name's 63.
pub fn operator_service_name(cluster: &str) -> String {
    format!("{cluster}-operator")
}

/// Name of the headless Service of `cluster`.
pub fn ping_service_name(cluster: &str) -> String {
    format!("{cluster}-ping")
}

/// Name of the server ConfigMap of `cluster`.
pub fn config_map_name(cluster: &str) -> String {
    format!("{cluster}-server-config")
}

/// Name of the identities Secret of `cluster`.
pub fn identities_secret_name(cluster: &str) -> String {
    format!("{cluster}-server-identities")
}

/// The labels of every server object of `cluster` (and of its pods).
pub fn labels(cluster: &str) -> BTreeMap<String, String> {
    identity::labels(APP_NAME, COMPONENT, cluster)
}

/// The selector of the server pods: the name and the instance (the cluster), which never
/// change.
pub fn selector_labels(cluster: &str) -> BTreeMap<String, String> {
    identity::selector_labels(APP_NAME, cluster)
}

/// [`selector_labels`] as a label selector string (`status.selector`, the scale subresource).
pub fn selector(cluster: &str) -> String {
    selector_labels(cluster)
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::super::MAX_CLUSTER_NAME_LEN;
    use super::super::fixtures::*;
    use super::*;
    use crate::build::test_support::pod_labels;
    use common_crds::naming::is_dns1123_label;

    #[test]
    fn the_selector_never_changes_across_spec_changes() {
        let expected = selector_labels("demo");
        assert_eq!(
            expected,
            BTreeMap::from([
                ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
                (
                    "app.kubernetes.io/name".to_string(),
                    "infinispan".to_string()
                ),
            ])
        );
        assert_eq!(
            selector("demo"),
            "app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan"
        );
        let mut variants = vec![default_objects(), full_objects()];
        let mut edited = full_cluster();
        edited.spec.replicas = 7;
        edited.spec.version = None;
        edited.spec.image = Some("registry.example.com/infinispan/server:patched".to_string());
        edited.spec.service.container.ephemeral_storage = true;
        edited.spec.security.endpoint_authentication = false;
        edited.metadata.labels = None;
        variants.push(built(&edited, &settings(), &full_referenced()));
        for objects in &variants {
            let set = &objects.stateful_set;
            assert_eq!(set.spec.selector.match_labels.as_ref(), Some(&expected));
            assert_eq!(set.spec.selector.match_expressions, None);
            let pod_labels = pod_labels(&set.spec.template);
            for (key, value) in &expected {
                assert_eq!(pod_labels.get(key), Some(value), "{key}");
            }
            for service in [
                &objects.ping_service,
                &objects.client_service,
                &objects.operator_service,
            ] {
                let spec = service.spec.clone().unwrap_or_default();
                assert_eq!(spec.selector.as_ref(), Some(&expected));
            }
            if let Some(budget) = &objects.pod_disruption_budget {
                let spec = budget.spec.clone().unwrap_or_default();
                assert_eq!(
                    spec.selector.and_then(|s| s.match_labels).as_ref(),
                    Some(&expected)
                );
            }
            assert_eq!(set.spec.service_name.as_deref(), Some("demo-ping"));
        }
        // Another cluster in the namespace selects other pods.
        let other = built(&cluster("other", "team-a"), &settings(), &referenced());
        assert_ne!(
            other.stateful_set.spec.selector,
            variants[0].stateful_set.spec.selector
        );
    }

    /// The Services of one cluster have distinct names, each a valid Service name (a DNS-1035
    /// label: at most 63 characters) for the longest and for a one-character cluster name.
    #[test]
    fn the_service_names_of_a_cluster_are_distinct_and_valid() {
        for cluster in ["a".repeat(MAX_CLUSTER_NAME_LEN), "a".to_string()] {
            let names = [
                client_service_name(&cluster),
                ping_service_name(&cluster),
                operator_service_name(&cluster),
                crate::build::expose::external_service_name(&cluster),
            ];
            for (i, name) in names.iter().enumerate() {
                assert!(name.len() <= 63 && is_dns1123_label(name), "{name}");
                assert!(!names[..i].contains(name), "{name} twice");
            }
        }
    }
}
