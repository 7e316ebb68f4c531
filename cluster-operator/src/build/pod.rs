//! Pieces of the pod templates of the server's StatefulSet and the resources operator's
//! Deployment: the security contexts of the restricted Pod Security profile, ports, probes,
//! mounts, Secret volumes, downward-API variables and pull Secrets; a probe's timing as a CR
//! tunes it.

use std::collections::BTreeMap;

use common_crds::infinispan::ProbeSpec;
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath,
    LocalObjectReference, ObjectFieldSelector, PodSecurityContext, Probe, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The seccomp profile the restricted Pod Security profile asks for: the runtime's default.
pub fn runtime_default() -> SeccompProfile {
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

/// A pod's security context under the restricted Pod Security profile: a non-root user, the
/// runtime's default seccomp profile and, when given, the `fsGroup` new volumes get (changed
/// only where the volume's root does not have it already).
pub(crate) fn restricted_pod(fs_group: Option<i64>) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        fs_group,
        fs_group_change_policy: fs_group.map(|_| "OnRootMismatch".to_string()),
        ..PodSecurityContext::default()
    }
}

/// A TCP container port.
pub(super) fn container_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: i32::from(port),
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

/// An HTTP GET probe of `path` on the container port named `port`.
pub(super) fn http_probe(
    port: &str,
    scheme: &str,
    path: &str,
    period_seconds: i32,
    timeout_seconds: i32,
    failure_threshold: i32,
) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(port.to_string()),
            scheme: Some(scheme.to_string()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(timeout_seconds),
        failure_threshold: Some(failure_threshold),
        ..Probe::default()
    }
}

/// `probe` with the timing fields `timing` sets (the handler stays).
pub(super) fn tuned(probe: Probe, timing: Option<&ProbeSpec>) -> Probe {
    let Some(&ProbeSpec {
        failure_threshold,
        initial_delay_seconds,
        period_seconds,
        success_threshold,
        timeout_seconds,
    }) = timing
    else {
        return probe;
    };
    Probe {
        failure_threshold: failure_threshold.or(probe.failure_threshold),
        initial_delay_seconds: initial_delay_seconds.or(probe.initial_delay_seconds),
        period_seconds: period_seconds.or(probe.period_seconds),
        success_threshold: success_threshold.or(probe.success_threshold),
        timeout_seconds: timeout_seconds.or(probe.timeout_seconds),
        ..probe
    }
}

/// The mount of `volume` on `path`.
pub(crate) fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// A volume `name` of the `keys` of the Secret `secret`, each a file of the same name.
pub(super) fn secret_volume(name: &str, secret: String, keys: &[&str]) -> Volume {
    Volume {
        name: name.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            items: Some(
                keys.iter()
                    .map(|key| KeyToPath {
                        key: key.to_string(),
                        path: key.to_string(),
                        ..KeyToPath::default()
                    })
                    .collect(),
            ),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The variable `name` holding the pod's field `path` (downward API).
pub(super) fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_string(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    }
}

/// The resources of a short-lived helper container of the operator's (an init container, a
/// Job): `cpu` and `memory` requested, `memory_limit` at most, no CPU limit.
pub(crate) fn helper_resources(
    cpu: &str,
    memory: &str,
    memory_limit: &str,
) -> ResourceRequirements {
    let quantity = |q: &str| Quantity(q.to_string());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), quantity(cpu)),
            ("memory".to_string(), quantity(memory)),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            quantity(memory_limit),
        )])),
        claims: None,
    }
}

/// A variable from the key `key` of the Secret `secret` (required: the pod does not start
/// without it).
pub(crate) fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    }
}

/// The pod's image pull Secrets, `None` when there are none.
pub(crate) fn image_pull_secrets(names: &[String]) -> Option<Vec<LocalObjectReference>> {
    non_empty(
        names
            .iter()
            .map(|name| LocalObjectReference { name: name.clone() })
            .collect(),
    )
}

/// `items`, or `None` when empty (the field is then left out).
pub(crate) fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// The first termination message (trimmed, not empty) of the containers of `pods`: what a
/// finished Job's pod said.
pub(crate) fn termination_message(pods: &[k8s_openapi::api::core::v1::Pod]) -> Option<String> {
    pods.iter()
        .filter_map(|pod| pod.status.as_ref()?.container_statuses.as_ref())
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.as_deref())
        .map(str::trim)
        .find(|m| !m.is_empty())
        .map(str::to_string)
}
