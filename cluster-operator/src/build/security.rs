//! The endpoint and transport TLS a cluster runs with (pure). A CR that names a type gets it; a
//! CR that names none keeps what the cluster was created with: `status.security`, else what its
//! StatefulSet records ([`SECURITY_ANNOTATION`]), else, for a StatefulSet of an operator
//! version before TLS by default, plain text; only a new cluster gets today's defaults
//! ([`NEW_CLUSTER_DEFAULTS`]). So upgrading the operator never changes a running cluster's
//! security (and never splits its transport).
//!
//! The controller hands the builders the CR [`resolved`]: every type written in.

use common_crds::Infinispan;
use common_crds::infinispan::{
    ClientCertType, EncryptionType, SecurityStatus, TransportEncryptionType,
};
use k8s_openapi::api::apps::v1::StatefulSet;

use crate::certificates::objects::{ca_config_map_name, endpoint_secret_name};

/// StatefulSet annotation: the endpoint and transport TLS its pods run with
/// (`endpoint=<type>,transport=<type>`).
pub const SECURITY_ANNOTATION: &str = "infinispan.org/security";

/// The TLS types of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Types {
    pub endpoint: EncryptionType,
    pub transport: TransportEncryptionType,
}

/// What a cluster created by this operator version gets when its CR names no type: TLS on the
/// endpoint and on the transport, from the cluster's own CA.
pub const NEW_CLUSTER_DEFAULTS: Types = Types {
    endpoint: EncryptionType::Generated,
    transport: TransportEncryptionType::Generated,
};

/// What clusters created before TLS by default run with.
pub const BEFORE_TLS_BY_DEFAULT: Types = Types {
    endpoint: EncryptionType::None,
    transport: TransportEncryptionType::None,
};

impl Types {
    /// The [`SECURITY_ANNOTATION`] value.
    pub fn annotation(self) -> String {
        format!(
            "endpoint={},transport={}",
            endpoint_name(self.endpoint),
            transport_name(self.transport)
        )
    }

    fn parse(value: &str) -> Option<Self> {
        let mut endpoint = None;
        let mut transport = None;
        for part in value.split(',') {
            match part.trim().split_once('=')? {
                ("endpoint", v) => endpoint = Some(parse_endpoint(v)?),
                ("transport", v) => transport = Some(parse_transport(v)?),
                _ => return None,
            }
        }
        Some(Self {
            endpoint: endpoint?,
            transport: transport?,
        })
    }
}

fn endpoint_name(t: EncryptionType) -> &'static str {
    match t {
        EncryptionType::None => "None",
        EncryptionType::Secret => "Secret",
        EncryptionType::Generated => "Generated",
    }
}

fn parse_endpoint(v: &str) -> Option<EncryptionType> {
    Some(match v {
        "None" => EncryptionType::None,
        "Secret" => EncryptionType::Secret,
        "Generated" => EncryptionType::Generated,
        _ => return None,
    })
}

fn transport_name(t: TransportEncryptionType) -> &'static str {
    match t {
        TransportEncryptionType::None => "None",
        TransportEncryptionType::Generated => "Generated",
    }
}

fn parse_transport(v: &str) -> Option<TransportEncryptionType> {
    Some(match v {
        "None" => TransportEncryptionType::None,
        "Generated" => TransportEncryptionType::Generated,
        _ => return None,
    })
}

/// What an absent type means for the cluster whose StatefulSet is `stateful_set` (read from
/// the API server; `None`: there is none yet, a new cluster).
pub fn created_with(stateful_set: Option<&StatefulSet>) -> Types {
    let Some(stateful_set) = stateful_set else {
        return NEW_CLUSTER_DEFAULTS;
    };
    stateful_set
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SECURITY_ANNOTATION))
        .and_then(|value| Types::parse(value))
        .unwrap_or(BEFORE_TLS_BY_DEFAULT)
}

/// The TLS in effect for `cluster`: the CR's types, else `status.security`, else `created_with`.
pub fn in_effect(cluster: &Infinispan, created_with: Types) -> SecurityStatus {
    let recorded = cluster.status.as_ref().and_then(|s| s.security.as_ref());
    let spec = &cluster.spec.security;
    let endpoint = spec
        .endpoint_encryption
        .type_
        .or(recorded.map(|r| r.endpoint_encryption))
        .unwrap_or(created_with.endpoint);
    let transport = spec
        .transport_encryption
        .type_
        .or(recorded.map(|r| r.transport_encryption))
        .unwrap_or(created_with.transport);
    SecurityStatus {
        endpoint_encryption: endpoint,
        transport_encryption: transport,
        ca_config_map: (endpoint == EncryptionType::Generated)
            .then(|| ca_config_map_name(&cluster.metadata.name.clone().unwrap_or_default())),
    }
}

/// The TLS in effect as far as the CR alone tells (for those that read the CR only: backups,
/// restores): the CR's types, else `status.security`, else plain text.
pub fn recorded(cluster: &Infinispan) -> SecurityStatus {
    in_effect(cluster, BEFORE_TLS_BY_DEFAULT)
}

/// `cluster` with the types of `security` written in.
pub fn resolved(cluster: &Infinispan, security: &SecurityStatus) -> Infinispan {
    let mut resolved = cluster.clone();
    resolved.spec.security.endpoint_encryption.type_ = Some(security.endpoint_encryption);
    resolved.spec.security.transport_encryption.type_ = Some(security.transport_encryption);
    resolved
}

/// The types of a [`resolved`] CR (an absent one is plain text).
pub fn types(resolved: &Infinispan) -> Types {
    Types {
        endpoint: resolved
            .spec
            .security
            .endpoint_encryption
            .type_
            .unwrap_or_default(),
        transport: resolved
            .spec
            .security
            .transport_encryption
            .type_
            .unwrap_or_default(),
    }
}

/// The endpoint speaks TLS (only: one port).
pub fn endpoint_tls(resolved: &Infinispan) -> bool {
    types(resolved).endpoint != EncryptionType::None
}

/// The endpoint asks clients for a certificate (`clientCert: Validate` or `Authenticate` on a
/// TLS endpoint): the operators present theirs.
pub fn client_certificates_required(resolved: &Infinispan) -> bool {
    resolved
        .spec
        .security
        .endpoint_encryption
        .asks_client_certificates()
        && endpoint_tls(resolved)
}

/// The certificate alone identifies clients (`clientCert: Authenticate` on a TLS endpoint with
/// authentication on): the server lists the accepted certificates themselves, maps a
/// certificate's common name to its role, and takes no password; the operators present their
/// certificate and no credentials.
pub fn certificate_authentication(resolved: &Infinispan) -> bool {
    resolved.spec.security.endpoint_encryption.client_cert == Some(ClientCertType::Authenticate)
        && resolved.spec.security.endpoint_authentication
        && endpoint_tls(resolved)
}

/// The Secret with the endpoint's certificate (`tls.key`, `tls.crt`, maybe `ca.crt`): the
/// user's (`Secret`) or the one the operator issues (`Generated`).
pub fn endpoint_certificate_secret(resolved: &Infinispan) -> Option<String> {
    match types(resolved).endpoint {
        EncryptionType::None => None,
        EncryptionType::Secret => resolved
            .spec
            .security
            .endpoint_encryption
            .cert_secret_name
            .clone(),
        EncryptionType::Generated => Some(endpoint_secret_name(
            resolved.metadata.name.as_deref().unwrap_or_default(),
        )),
    }
}

/// The transport TLS the pods of `existing` run with, when `wanted` differs and pods still run
/// (or will, `replicas` being the CR's): `(running, wanted)`. Pods with and without transport
/// TLS cannot form one cluster, so such a change waits for the cluster to be scaled to 0.
pub fn transport_change_refused(
    existing: Option<&StatefulSet>,
    wanted: TransportEncryptionType,
    replicas: i32,
) -> Option<(TransportEncryptionType, TransportEncryptionType)> {
    let existing = existing?;
    let running = created_with(Some(existing)).transport;
    let pods = existing
        .spec
        .replicas
        .unwrap_or(1)
        .max(existing.status.as_ref().map_or(0, |s| s.replicas));
    (running != wanted && pods > 0 && replicas > 0).then_some((running, wanted))
}

/// The name of a transport TLS type, as in the CR.
pub fn transport_type_name(t: TransportEncryptionType) -> &'static str {
    transport_name(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::server::fixtures::cluster;
    use std::collections::BTreeMap;

    fn stateful_set(annotation: Option<&str>) -> StatefulSet {
        let mut s = StatefulSet::default();
        s.metadata.annotations =
            annotation.map(|a| BTreeMap::from([(SECURITY_ANNOTATION.to_string(), a.to_string())]));
        s
    }

    #[test]
    fn a_new_cluster_gets_tls_and_an_existing_one_keeps_what_it_was_created_with() {
        let cr = {
            let mut c = cluster("demo", "team-a");
            c.spec.security.endpoint_encryption.type_ = None;
            c.spec.security.transport_encryption.type_ = None;
            c
        };
        assert_eq!(created_with(None), NEW_CLUSTER_DEFAULTS);
        let tls_by_default = Types {
            endpoint: EncryptionType::Generated,
            transport: TransportEncryptionType::Generated,
        };
        let new = in_effect(&cr, tls_by_default);
        assert_eq!(new.endpoint_encryption, EncryptionType::Generated);
        assert_eq!(new.transport_encryption, TransportEncryptionType::Generated);
        assert_eq!(new.ca_config_map.as_deref(), Some("demo-ca.crt"));
        // A StatefulSet of an earlier version: plain text, as it ran.
        let old = in_effect(&cr, created_with(Some(&stateful_set(None))));
        assert_eq!(old.endpoint_encryption, EncryptionType::None);
        assert_eq!(old.transport_encryption, TransportEncryptionType::None);
        assert_eq!(old.ca_config_map, None);
        // The StatefulSet's record, then the status, win over the defaults.
        let record = Types {
            endpoint: EncryptionType::None,
            transport: TransportEncryptionType::Generated,
        };
        let from_annotation = in_effect(
            &cr,
            created_with(Some(&stateful_set(Some(&record.annotation())))),
        );
        assert_eq!(
            from_annotation.transport_encryption,
            TransportEncryptionType::Generated
        );
        assert_eq!(from_annotation.endpoint_encryption, EncryptionType::None);
        let mut with_status = cr.clone();
        with_status.status = Some(common_crds::infinispan::InfinispanStatus {
            security: Some(SecurityStatus {
                endpoint_encryption: EncryptionType::Generated,
                transport_encryption: TransportEncryptionType::None,
                ca_config_map: None,
            }),
            ..Default::default()
        });
        let kept = in_effect(&with_status, created_with(Some(&stateful_set(None))));
        assert_eq!(kept.endpoint_encryption, EncryptionType::Generated);
        assert_eq!(kept.transport_encryption, TransportEncryptionType::None);
        // The CR's own types win over everything.
        let mut explicit = with_status.clone();
        explicit.spec.security.endpoint_encryption.type_ = Some(EncryptionType::None);
        assert_eq!(
            in_effect(&explicit, tls_by_default).endpoint_encryption,
            EncryptionType::None
        );
        // Readers of the CR alone: the status, else plain text.
        assert_eq!(
            recorded(&with_status).endpoint_encryption,
            EncryptionType::Generated
        );
        assert_eq!(recorded(&cr).endpoint_encryption, EncryptionType::None);
    }

    #[test]
    fn the_annotation_reads_back_and_garbage_means_an_earlier_version() {
        for endpoint in [
            EncryptionType::None,
            EncryptionType::Secret,
            EncryptionType::Generated,
        ] {
            for transport in [
                TransportEncryptionType::None,
                TransportEncryptionType::Generated,
            ] {
                let types = Types {
                    endpoint,
                    transport,
                };
                assert_eq!(Types::parse(&types.annotation()), Some(types));
            }
        }
        assert_eq!(
            created_with(Some(&stateful_set(Some("endpoint=Maybe")))),
            BEFORE_TLS_BY_DEFAULT
        );
    }

    #[test]
    fn a_transport_change_waits_for_the_cluster_to_be_scaled_to_zero() {
        use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
        let with = |replicas: i32, pods: i32, annotation: Option<&str>| {
            let mut s = stateful_set(annotation);
            s.spec = StatefulSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            };
            s.status = Some(StatefulSetStatus {
                replicas: pods,
                ..Default::default()
            });
            s
        };
        let generated = TransportEncryptionType::Generated;
        let none = TransportEncryptionType::None;
        // A StatefulSet of an earlier version runs without transport TLS.
        assert_eq!(
            transport_change_refused(Some(&with(3, 3, None)), generated, 3),
            Some((none, generated))
        );
        assert_eq!(
            transport_change_refused(Some(&with(3, 3, None)), none, 3),
            None
        );
        // Scaled to 0 (or being scaled to 0 by the same change): allowed.
        assert_eq!(
            transport_change_refused(Some(&with(0, 0, None)), generated, 3),
            None
        );
        assert_eq!(
            transport_change_refused(Some(&with(3, 3, None)), generated, 0),
            None
        );
        // Pods still terminating: not yet.
        assert!(transport_change_refused(Some(&with(0, 2, None)), generated, 3).is_some());
        // A new cluster: nothing runs.
        assert_eq!(transport_change_refused(None, generated, 3), None);
        let annotated = Types {
            endpoint: EncryptionType::Generated,
            transport: generated,
        }
        .annotation();
        assert_eq!(
            transport_change_refused(Some(&with(2, 2, Some(&annotated))), none, 2),
            Some((generated, none))
        );
    }

    #[test]
    fn the_endpoint_certificate_is_the_users_or_the_generated_one() {
        let mut cr = cluster("demo", "team-a");
        cr.spec.security.endpoint_encryption.type_ = Some(EncryptionType::Generated);
        assert_eq!(
            endpoint_certificate_secret(&cr).as_deref(),
            Some("demo-endpoint-tls")
        );
        cr.spec.security.endpoint_encryption.type_ = Some(EncryptionType::Secret);
        cr.spec.security.endpoint_encryption.cert_secret_name = Some("mine".into());
        assert_eq!(endpoint_certificate_secret(&cr).as_deref(), Some("mine"));
        cr.spec.security.endpoint_encryption.type_ = Some(EncryptionType::None);
        assert_eq!(endpoint_certificate_secret(&cr), None);
        assert!(!endpoint_tls(&cr));
    }
}
