//! `spec.expose`: the object that makes the server endpoint (port 11222, REST and Hot Rod)
//! reachable from outside the Kubernetes cluster (pure).
//!
//! - `NodePort` / `LoadBalancer`: a Service `<cluster>-external` of that type selecting the
//!   server pods, `spec.expose.nodePort` when given, the load balancer's port
//!   `spec.expose.port` (default 11222; the pods' port stays 11222), `spec.expose.annotations`
//!   on the Service (load-balancer settings live there).
//! - `Ingress`: an Ingress `<cluster>` routing `/` of `spec.expose.host` (every host when
//!   absent) to the client Service `<cluster>:11222`, `spec.expose.annotations` and `labels` on
//!   it. An Ingress
//!   carries HTTP: REST works through it, Hot Rod does not (use NodePort or LoadBalancer for Hot
//!   Rod clients). With endpoint TLS on, the ingress controller must talk HTTPS to the backend or
//!   pass TLS through: that is controller-specific (for ingress-nginx,
//!   `nginx.ingress.kubernetes.io/backend-protocol: HTTPS`), so it is the user's annotation.
//!
//! - `Route`: when the API server serves `route.openshift.io/v1` (OpenShift), a Route `<cluster>`
//!   to the client Service's port, `spec.expose.host` when given (else the router's), TLS
//!   passthrough when the endpoint has TLS: the router forwards the TLS connection by its SNI,
//!   so Hot Rod clients get through too, and the server's own certificate is what clients see
//!   (it names the Services, not the Route's host: clients that check the name need a
//!   certificate of their own, `type: Secret`). Without TLS, a plain HTTP Route (REST only).
//!   Where Routes are not served: the Ingress above.
//!
//! The controller deletes the object of a type the CR no longer asks for.

use std::borrow::Cow;

use common_crds::Infinispan;
use common_crds::infinispan::ExposeType;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::server::{SERVER_PORT, SERVER_PORT_NAME, client_service_name, labels, selector_labels};
use super::user_metadata::Added;

/// What exposes the endpoint.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposed {
    pub service: Option<Service>,
    pub ingress: Option<Ingress>,
    pub route: Option<Route>,
}

/// The API group and version of OpenShift's Route, as discovery lists it.
pub const ROUTE_API_GROUP_VERSION: &str = "route.openshift.io/v1";
/// The resource (plural) discovery lists for Routes.
pub const ROUTE_PLURAL: &str = "routes";

/// `route.openshift.io/v1` `Route`, the fields the operator sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: RouteSpec,
}

/// `spec` of a [`Route`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub to: RouteTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<RoutePort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RouteTls>,
}

/// The Service a [`Route`] sends to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTarget {
    pub kind: String,
    pub name: String,
    pub weight: i32,
}

/// The Service port a [`Route`] sends to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutePort {
    pub target_port: IntOrString,
}

/// How a [`Route`] carries TLS.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTls {
    /// `passthrough`: the router forwards the connection as it is, by SNI.
    pub termination: String,
    /// `None`: plain HTTP to the host is refused.
    pub insecure_edge_termination_policy: String,
}

impl Resource for Route {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Route".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "route.openshift.io".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        ROUTE_PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Name of the Route of `cluster`.
pub fn route_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the external Service of `cluster`.
pub fn external_service_name(cluster: &str) -> String {
    format!("{cluster}-external")
}

/// Name of the Ingress of `cluster`.
pub fn ingress_name(cluster: &str) -> String {
    cluster.to_string()
}

/// The metadata of the exposing object `name`: the server's labels, the CR's `added` labels
/// and annotations (`spec.expose.labels`, `annotations`, the target annotations' keys).
fn metadata(cluster: &Infinispan, name: String, added: &Added) -> ObjectMeta {
    let mut metadata = ObjectMeta {
        name: Some(name),
        namespace: cluster.namespace(),
        labels: Some(labels(&cluster.name_any())),
        owner_references: Some(vec![super::identity::controller_reference(
            &cluster.name_any(),
            cluster.uid().unwrap_or_default(),
        )]),
        ..ObjectMeta::default()
    };
    added.apply_to(&mut metadata);
    metadata
}

/// The objects `spec.expose` asks for (none when it is absent), with the labels and
/// annotations `added` ([`super::user_metadata::UserMetadata::exposing`]); a Route only when
/// `routes_served`, an Ingress instead otherwise.
pub fn build(cluster: &Infinispan, added: &Added, routes_served: bool) -> Exposed {
    let Some(expose) = &cluster.spec.expose else {
        return Exposed::default();
    };
    let name = cluster.name_any();
    match expose.type_ {
        ExposeType::Route if routes_served => {
            let tls = super::security::endpoint_tls(cluster).then(|| RouteTls {
                termination: "passthrough".to_string(),
                insecure_edge_termination_policy: "None".to_string(),
            });
            Exposed {
                route: Some(Route {
                    api_version: ROUTE_API_GROUP_VERSION.to_string(),
                    kind: "Route".to_string(),
                    metadata: metadata(cluster, route_name(&name), added),
                    spec: RouteSpec {
                        host: expose.host.clone(),
                        to: RouteTarget {
                            kind: "Service".to_string(),
                            name: client_service_name(&name),
                            weight: 100,
                        },
                        port: Some(RoutePort {
                            target_port: IntOrString::String(SERVER_PORT_NAME.to_string()),
                        }),
                        tls,
                    },
                }),
                ..Exposed::default()
            }
        }
        ExposeType::NodePort | ExposeType::LoadBalancer => {
            let type_ = match expose.type_ {
                ExposeType::NodePort => "NodePort",
                _ => "LoadBalancer",
            };
            Exposed {
                service: Some(Service {
                    metadata: metadata(cluster, external_service_name(&name), added),
                    spec: Some(ServiceSpec {
                        type_: Some(type_.to_string()),
                        selector: Some(selector_labels(&name)),
                        ports: Some(vec![ServicePort {
                            name: Some(SERVER_PORT_NAME.to_string()),
                            port: expose
                                .port
                                .filter(|_| type_ == "LoadBalancer")
                                .unwrap_or(i32::from(SERVER_PORT)),
                            target_port: Some(IntOrString::String(SERVER_PORT_NAME.to_string())),
                            node_port: expose.node_port.filter(|_| type_ == "NodePort"),
                            protocol: Some("TCP".to_string()),
                            ..ServicePort::default()
                        }]),
                        ..ServiceSpec::default()
                    }),
                    status: None,
                }),
                ingress: None,
                route: None,
            }
        }
        ExposeType::Ingress | ExposeType::Route => Exposed {
            service: None,
            route: None,
            ingress: Some(Ingress {
                metadata: metadata(cluster, ingress_name(&name), added),
                spec: Some(IngressSpec {
                    rules: Some(vec![IngressRule {
                        host: expose.host.clone(),
                        http: Some(HTTPIngressRuleValue {
                            paths: vec![HTTPIngressPath {
                                path: Some("/".to_string()),
                                path_type: "Prefix".to_string(),
                                backend: IngressBackend {
                                    service: Some(IngressServiceBackend {
                                        name: client_service_name(&name),
                                        port: Some(ServiceBackendPort {
                                            number: Some(i32::from(SERVER_PORT)),
                                            name: None,
                                        }),
                                    }),
                                    resource: None,
                                },
                            }],
                        }),
                    }]),
                    ..IngressSpec::default()
                }),
                status: None,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::infinispan::{ExposeSpec, InfinispanSpec};
    use serde_json::json;

    /// What `cr` asks for, exposed.
    fn built(cr: &Infinispan) -> Exposed {
        let added = crate::build::user_metadata::of(cr).expect("no reserved key");
        build(cr, &added.exposing, false)
    }

    fn cluster(expose: serde_json::Value) -> Infinispan {
        let spec: InfinispanSpec =
            serde_json::from_value(json!({ "expose": expose })).expect("spec");
        let mut cr = Infinispan::new("demo", spec);
        cr.metadata.namespace = Some("team-a".into());
        cr.metadata.uid = Some("uid-1".into());
        cr
    }

    #[test]
    fn nothing_without_expose() {
        let mut cr = cluster(json!(null));
        cr.spec.expose = None;
        assert_eq!(built(&cr), Exposed::default());
    }

    #[test]
    fn node_port_and_load_balancer_services() {
        let exposed = built(&cluster(
            json!({ "type": "NodePort", "nodePort": 30222, "annotations": { "a": "b" } }),
        ));
        let service = exposed.service.expect("service");
        assert!(exposed.ingress.is_none());
        assert_eq!(service.metadata.name.as_deref(), Some("demo-external"));
        assert_eq!(
            service.metadata.annotations,
            Some([("a".to_string(), "b".to_string())].into())
        );
        let owner = &service.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("uid-1", Some(true), Some(true))
        );
        let spec = service.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        assert_eq!(spec.selector, Some(selector_labels("demo")));
        let port = &spec.ports.expect("ports")[0];
        assert_eq!((port.port, port.node_port), (11222, Some(30222)));

        let exposed = built(&cluster(json!({ "type": "LoadBalancer" })));
        let spec = exposed.service.and_then(|s| s.spec).expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.ports.expect("ports")[0].node_port, None);
    }

    #[test]
    fn the_exposing_object_takes_its_labels_and_annotations_never_in_its_selector() {
        let mut cr = cluster(json!({
            "type": "LoadBalancer",
            "labels": {"public": "yes"},
            "annotations": {"metallb.io/address-pool": "public"},
        }));
        cr.spec.service.service_labels = [("team".to_string(), "shop".to_string())].into();
        let service = built(&cr).service.expect("service");
        let mut expected = labels("demo");
        expected.insert("public".to_string(), "yes".to_string());
        // serviceLabels are the cluster's own Services', not the exposing one's.
        assert_eq!(service.metadata.labels, Some(expected.clone()));
        assert_eq!(
            service.metadata.annotations,
            Some([("metallb.io/address-pool".to_string(), "public".to_string())].into())
        );
        assert_eq!(
            service.spec.and_then(|s| s.selector),
            Some(selector_labels("demo"))
        );
        cr.spec.expose = Some(ExposeSpec {
            type_: ExposeType::Ingress,
            ..cr.spec.expose.clone().expect("expose")
        });
        let ingress = built(&cr).ingress.expect("ingress");
        assert_eq!(ingress.metadata.labels, Some(expected));
    }

    #[test]
    fn a_load_balancer_listens_on_its_port_and_sends_to_the_pods_11222() {
        let port = |expose: serde_json::Value| {
            let service = built(&cluster(expose)).service.expect("service");
            let port = service.spec.expect("spec").ports.expect("ports")[0].clone();
            (port.port, port.target_port)
        };
        let target = Some(IntOrString::String(SERVER_PORT_NAME.to_string()));
        assert_eq!(
            port(json!({ "type": "LoadBalancer", "port": 443 })),
            (443, target.clone())
        );
        assert_eq!(
            port(json!({ "type": "LoadBalancer" })),
            (11222, target.clone())
        );
        assert_eq!(port(json!({ "type": "NodePort" })), (11222, target));
    }

    #[test]
    fn a_route_passes_tls_through_to_the_client_service_where_routes_are_served() {
        let mut cr = cluster(json!({ "type": "Route", "host": "ispn.apps.example.com" }));
        cr.spec.security.endpoint_encryption.type_ =
            Some(common_crds::infinispan::EncryptionType::Generated);
        let added = crate::build::user_metadata::of(&cr).expect("no reserved key");
        let exposed = build(&cr, &added.exposing, true);
        assert!(exposed.service.is_none() && exposed.ingress.is_none());
        let route = serde_json::to_value(exposed.route.expect("route")).expect("json");
        assert_eq!(route["apiVersion"], "route.openshift.io/v1");
        assert_eq!(route["metadata"]["name"], "demo");
        assert_eq!(
            route["spec"],
            json!({
                "host": "ispn.apps.example.com",
                "to": {"kind": "Service", "name": "demo", "weight": 100},
                "port": {"targetPort": SERVER_PORT_NAME},
                "tls": {"termination": "passthrough", "insecureEdgeTerminationPolicy": "None"},
            })
        );
        // Without TLS on the endpoint: plain HTTP.
        let mut plain = cr.clone();
        plain.spec.security.endpoint_encryption.type_ =
            Some(common_crds::infinispan::EncryptionType::None);
        let route = build(&plain, &added.exposing, true).route.expect("route");
        assert_eq!(route.spec.tls, None);
        // Where Routes are not served: an Ingress.
        let fallback = build(&cr, &added.exposing, false);
        assert!(fallback.route.is_none());
        assert_eq!(
            fallback
                .ingress
                .and_then(|i| i.spec?.rules?[0].host.clone())
                .as_deref(),
            Some("ispn.apps.example.com")
        );
    }

    #[test]
    fn ingress_routes_to_the_client_service() {
        let exposed = built(&cluster(
            json!({ "type": "Ingress", "host": "ispn.example.com" }),
        ));
        assert!(exposed.service.is_none());
        let ingress = exposed.ingress.expect("ingress");
        assert_eq!(ingress.metadata.name.as_deref(), Some("demo"));
        let rule = &ingress.spec.expect("spec").rules.expect("rules")[0];
        assert_eq!(rule.host.as_deref(), Some("ispn.example.com"));
        let path = &rule.http.as_ref().expect("http").paths[0];
        let backend = path.backend.service.as_ref().expect("service backend");
        assert_eq!(backend.name, "demo");
        assert_eq!(backend.port.as_ref().and_then(|p| p.number), Some(11222));
    }
}
