//! The server's Services and PodDisruptionBudget: the headless Service of JGroups' DNS_PING
//! (`<cluster>-ping`, not-ready pods included), the client Service (`<cluster>`), its twin for
//! the operators with client-IP session affinity (`<cluster>-operator`), and the budget of one
//! unavailable pod when there are several.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::inputs::Cx;
use super::{
    JGROUPS_PORT, JGROUPS_PORT_NAME, SERVER_PORT, SERVER_PORT_NAME, client_service_name,
    operator_service_name, ping_service_name, selector_labels, stateful_set_name,
};
use crate::build::user_metadata::Added;

impl Cx<'_> {
    pub(super) fn ping_service(&self) -> Service {
        let mut metadata = self.metadata(ping_service_name(self.name));
        self.user.ping_service.apply_to(&mut metadata);
        Service {
            metadata,
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_string()),
                cluster_ip: Some("None".to_string()),
                publish_not_ready_addresses: Some(true),
                selector: Some(selector_labels(self.name)),
                ports: Some(vec![ServicePort {
                    name: Some(JGROUPS_PORT_NAME.to_string()),
                    port: i32::from(JGROUPS_PORT),
                    target_port: Some(IntOrString::Int(i32::from(JGROUPS_PORT))),
                    protocol: Some("TCP".to_string()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    /// The client Service, labelled [`super::SERVICE_LABEL`] `client` besides (what the
    /// ServiceMonitor selects).
    pub(super) fn client_service(&self) -> Service {
        let mut service = self.server_port_service(
            client_service_name(self.name),
            &self.user.client_service,
            None,
        );
        service
            .metadata
            .labels
            .get_or_insert_default()
            .extend(super::service_monitor::client_service_labels());
        service
    }

    pub(super) fn operator_service(&self) -> Service {
        self.server_port_service(
            operator_service_name(self.name),
            &self.user.operator_service,
            Some("ClientIP"),
        )
    }

    /// A ClusterIP Service `name` on the server port of the server pods, with the CR's `added`
    /// labels and annotations.
    fn server_port_service(
        &self,
        name: String,
        added: &Added,
        session_affinity: Option<&str>,
    ) -> Service {
        let mut metadata = self.metadata(name);
        added.apply_to(&mut metadata);
        Service {
            metadata,
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_string()),
                selector: Some(selector_labels(self.name)),
                session_affinity: session_affinity.map(str::to_string),
                ports: Some(vec![ServicePort {
                    name: Some(SERVER_PORT_NAME.to_string()),
                    port: i32::from(SERVER_PORT),
                    target_port: Some(IntOrString::String(SERVER_PORT_NAME.to_string())),
                    protocol: Some("TCP".to_string()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    pub(super) fn pod_disruption_budget(&self) -> Option<PodDisruptionBudget> {
        (self.cluster.spec.replicas > 1).then(|| PodDisruptionBudget {
            metadata: self.metadata(stateful_set_name(self.name)),
            spec: Some(PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(1)),
                selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(self.name)),
                    match_expressions: None,
                }),
                unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_string()),
                ..PodDisruptionBudgetSpec::default()
            }),
            status: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn the_operators_service_is_the_client_service_with_client_ip_affinity() {
        for objects in [default_objects(), full_objects(), bare_objects()] {
            let cluster = objects
                .client_service
                .metadata
                .name
                .clone()
                .unwrap_or_default();
            let client = objects.client_service.spec.clone().unwrap_or_default();
            let operator = objects.operator_service.spec.clone().unwrap_or_default();
            assert_eq!(operator.session_affinity.as_deref(), Some("ClientIP"));
            // The API server's default timeout (10800 s).
            assert_eq!(operator.session_affinity_config, None);
            // Applications keep spreading their connections over the pods.
            assert_eq!(client.session_affinity, None);
            // Otherwise the same Service: selector, port, type.
            assert_eq!(
                ServiceSpec {
                    session_affinity: None,
                    ..operator
                },
                client
            );
            assert_eq!(
                objects.operator_service.metadata.name,
                Some(format!("{cluster}-operator"))
            );
            // The same metadata but the name and the client Service's own label, which the
            // ServiceMonitor selects (each pod scraped once, not once per Service).
            let mut client_metadata = objects.client_service.metadata.clone();
            let client_labels = client_metadata.labels.get_or_insert_default();
            assert_eq!(
                client_labels.remove(super::super::SERVICE_LABEL).as_deref(),
                Some(super::super::CLIENT_SERVICE)
            );
            assert_eq!(
                ObjectMeta {
                    name: None,
                    ..objects.operator_service.metadata.clone()
                },
                ObjectMeta {
                    name: None,
                    ..client_metadata
                }
            );
        }
    }

    #[test]
    fn the_budget_exists_only_for_several_replicas() {
        for (replicas, expected) in [(0, false), (1, false), (2, true), (5, true)] {
            let mut cr = cluster("demo", "team-a");
            cr.spec.replicas = replicas;
            let objects = built(&cr, &settings(), &referenced());
            assert_eq!(
                objects.pod_disruption_budget.is_some(),
                expected,
                "{replicas}"
            );
            assert_eq!(objects.stateful_set.spec.replicas, Some(replicas));
            if let Some(budget) = objects.pod_disruption_budget {
                let spec = budget.spec.unwrap_or_default();
                assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
                assert_eq!(spec.min_available, None);
            }
        }
    }
}
