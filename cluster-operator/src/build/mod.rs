//! The desired Kubernetes objects of one `Infinispan` CR, built by pure functions (no I/O), so
//! that every builder is unit-tested and the controller only applies what they return with
//! server-side apply under one field manager.
//!
//! - [`server`]: the server's configuration (ConfigMap), Services, StatefulSet,
//!   PodDisruptionBudget.
//! - [`expose`]: `spec.expose`, a NodePort or LoadBalancer Service, or an Ingress.
//! - [`resources_operator`]: the per-cluster resources operator: ServiceAccount, Role,
//!   RoleBinding and Deployment.

pub mod expose;
pub mod resources_operator;
pub mod server;
#[cfg(test)]
mod snapshot;

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::labels::{CLUSTER_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER};
use k8s_openapi::api::core::v1::{Capabilities, SeccompProfile, SecurityContext};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

const NAME_LABEL: &str = "app.kubernetes.io/name";
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// `app.kubernetes.io/part-of` of every object.
pub const PART_OF: &str = "infinispan";

/// The labels of the objects of one component (`app`, `component`) of `cluster`: the
/// recommended `app.kubernetes.io/*` labels and `infinispan.org/cluster`.
fn labels(app: &str, component: &str, cluster: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(app, cluster);
    labels.extend(
        [
            (COMPONENT_LABEL, component),
            (PART_OF_LABEL, PART_OF),
            (MANAGED_BY_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER),
            (CLUSTER_LABEL, cluster),
        ]
        .map(|(key, value)| (key.to_string(), value.to_string())),
    );
    labels
}

/// A selector that never changes: the name (`app`) and the instance (the cluster).
fn selector_labels(app: &str, cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), app.to_string()),
        (INSTANCE_LABEL.to_string(), cluster.to_string()),
    ])
}

/// The controller owner reference to the `Infinispan` CR `name` with `uid`, with
/// `blockOwnerDeletion` (setting it needs `update` on `infinispans/finalizers` under the
/// OwnerReferencesPermissionEnforcement admission plugin).
/// The seccomp profile the restricted Pod Security profile asks for: the runtime's default.
pub(crate) fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_string(),
        localhost_profile: None,
    }
}

/// A container's security context under the restricted Pod Security profile: no privilege
/// escalation, every capability dropped, not privileged, a non-root user (the image's numeric
/// user or the one the platform assigns), the runtime's default seccomp profile; a read-only
/// root filesystem when `read_only_root` (containers that write only to their volumes).
pub(crate) fn restricted_container(read_only_root: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            add: None,
        }),
        privileged: Some(false),
        read_only_root_filesystem: read_only_root.then_some(true),
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

pub(crate) fn controller_reference(name: &str, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: Infinispan::api_version(&()).into_owned(),
        kind: Infinispan::kind(&()).into_owned(),
        name: name.to_string(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
