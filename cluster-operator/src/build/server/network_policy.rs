//! The cluster's NetworkPolicy (named like the cluster, `spec.networkPolicy`), ingress only, on
//! the server pods:
//! - the JGroups ports (7800, and 57800 of failure detection) only from the cluster's own pods:
//!   no other pod may join the cluster or receive its state transfer;
//! - the endpoint (11222: REST, Hot Rod, metrics) from the cluster's own pods, its Backup archive
//!   Jobs (label `infinispan.org/archive-of`), its resources
//!   operator's pods, the cluster operator's namespace (backups, restores, the server's checks)
//!   and `spec.networkPolicy.endpointPeers` (default: every pod of the namespace); from anywhere
//!   when `spec.expose` publishes the endpoint outside the Kubernetes cluster.
//!
//! The kubelet's probes come from the node, which NetworkPolicies do not restrict.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::inputs::Cx;
use super::{JGROUPS_FD_PORT, JGROUPS_PORT, SERVER_PORT, selector_labels, stateful_set_name};

/// The label Kubernetes puts on every namespace with its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_string()),
        end_port: None,
    }
}

fn pods(labels: std::collections::BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        // No labels: every pod (`podSelector: {}`).
        pod_selector: Some(LabelSelector {
            match_labels: (!labels.is_empty()).then_some(labels),
            match_expressions: None,
        }),
        ..NetworkPolicyPeer::default()
    }
}

impl Cx<'_> {
    /// `None` when `spec.networkPolicy.enabled` is false (a left-over one is the controller's
    /// to delete).
    pub(super) fn network_policy(&self) -> Option<NetworkPolicy> {
        let spec = &self.cluster.spec.network_policy;
        if !spec.enabled {
            return None;
        }
        let own_pods = pods(selector_labels(self.name));
        let endpoint_from = if self.cluster.spec.expose.is_some() {
            // Published outside the Kubernetes cluster: any source (no `from`).
            None
        } else {
            let mut peers = vec![
                own_pods.clone(),
                pods(crate::build::resources_operator::selector_labels(self.name)),
                // The Jobs copying its Backup archives to and from their volumes.
                pods(
                    [(
                        crate::backup::volume::ARCHIVE_OF_LABEL.to_string(),
                        self.name.to_string(),
                    )]
                    .into(),
                ),
                // The Jobs running its Batches' CLI scripts.
                pods(
                    [(
                        crate::batch::BATCH_OF_LABEL.to_string(),
                        self.name.to_string(),
                    )]
                    .into(),
                ),
            ];
            if let Some(namespace) = &self.settings.operator_namespace {
                peers.push(NetworkPolicyPeer {
                    namespace_selector: Some(LabelSelector {
                        match_labels: Some(
                            [(NAMESPACE_NAME_LABEL.to_string(), namespace.clone())].into(),
                        ),
                        match_expressions: None,
                    }),
                    ..NetworkPolicyPeer::default()
                });
            }
            match &spec.endpoint_peers {
                Some(given) => peers.extend(given.iter().cloned()),
                // Every pod of the namespace.
                None => peers.push(pods(Default::default())),
            }
            Some(peers)
        };
        Some(NetworkPolicy {
            metadata: self.metadata(stateful_set_name(self.name)),
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(self.name)),
                    match_expressions: None,
                }),
                policy_types: Some(vec!["Ingress".to_string()]),
                ingress: Some(vec![
                    NetworkPolicyIngressRule {
                        from: Some(vec![own_pods]),
                        ports: Some(vec![tcp(JGROUPS_PORT), tcp(JGROUPS_FD_PORT)]),
                    },
                    NetworkPolicyIngressRule {
                        from: endpoint_from,
                        ports: Some(vec![tcp(SERVER_PORT)]),
                    },
                ]),
                egress: None,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use serde_json::json;

    fn policy(objects: &super::super::Objects) -> serde_json::Value {
        serde_json::to_value(objects.network_policy.as_ref().expect("a NetworkPolicy"))
            .expect("serializes")
    }

    #[test]
    fn jgroups_only_from_the_clusters_pods_and_the_endpoint_from_the_namespace_and_operators() {
        let objects = default_objects();
        let policy = policy(&objects);
        let selector = &policy["spec"]["podSelector"]["matchLabels"];
        assert_eq!(&policy["spec"]["policyTypes"], &json!(["Ingress"]));
        let rules = policy["spec"]["ingress"].as_array().expect("rules");
        assert_eq!(rules.len(), 2);
        // JGroups: the cluster's pods, nothing else.
        assert_eq!(
            rules[0]["from"],
            json!([{"podSelector": {"matchLabels": selector}}])
        );
        assert_eq!(
            rules[0]["ports"],
            json!([{"port": 7800, "protocol": "TCP"}, {"port": 57800, "protocol": "TCP"}])
        );
        // The endpoint: the cluster's pods, its resources operator, every pod of the namespace.
        assert_eq!(
            rules[1]["ports"],
            json!([{"port": 11222, "protocol": "TCP"}])
        );
        let from = rules[1]["from"].as_array().expect("peers");
        assert_eq!(from[0], json!({"podSelector": {"matchLabels": selector}}));
        assert!(from.contains(&json!({"podSelector": {}})), "{from:?}");
    }

    #[test]
    fn given_peers_replace_the_namespace_and_the_operators_namespace_is_admitted() {
        let mut cluster = cluster("demo", "team-a");
        cluster.spec.network_policy.endpoint_peers = Some(vec![serde_json::from_value(
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}),
        )
        .expect("peer")]);
        let mut settings = settings();
        settings.operator_namespace = Some("infinispan-operator".to_string());
        let objects = built(&cluster, &settings, &referenced());
        let from = policy(&objects)["spec"]["ingress"][1]["from"].clone();
        let from = from.as_array().expect("peers");
        assert!(!from.contains(&json!({"podSelector": {}})), "{from:?}");
        assert!(from.contains(&json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "infinispan-operator"}}})));
        assert!(from.contains(&json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}})));
    }

    #[test]
    fn exposed_endpoints_take_any_source_and_a_disabled_policy_is_none() {
        let mut cluster = cluster("demo", "team-a");
        cluster.spec.expose =
            Some(serde_json::from_value(json!({"type": "NodePort"})).expect("expose"));
        let objects = built(&cluster, &settings(), &referenced());
        let rules = policy(&objects)["spec"]["ingress"].clone();
        assert!(rules[1].get("from").is_none(), "{rules}");
        assert!(rules[0]["from"].is_array(), "JGroups stays restricted");
        cluster.spec.network_policy.enabled = false;
        assert!(
            built(&cluster, &settings(), &referenced())
                .network_policy
                .is_none()
        );
    }
}
