//! Archives on PersistentVolumeClaims (`Backup.spec.storage: Volume`, `Restore.spec.source`),
//! pure: the claim of a Backup, the Jobs that copy an archive between a server and a claim, and
//! what a finished Job says.
//!
//! The cluster operator cannot mount a claim itself, and a server pod cannot get a new volume
//! without a restart, so a short Job does the copy, running the operator's own image
//! (`cluster-operator archive save|restore`, [`super::archive_job`]):
//!
//! - **save**: once the server has written a Backup's archive, the Job streams it from pod 0
//!   (REST, like a Restore did before) into `<claim>/<name>/<name>.zip` (infinispan-operator's
//!   layout: a claim it left can be restored, and one of ours read by its tools), checks that
//!   it is a zip, and reports its size and SHA-256 in its termination message. The operator then
//!   deletes the server's copy.
//! - **restore**: the Job reads the archive from the claim (mounted read-only), checks the
//!   selection against its listing, restores the proto schemas first when needed, and uploads
//!   the rest, starting the server's restore job, which the operator follows as before.
//!
//! The Jobs reach pod 0 with the operators' credentials (`secretKeyRef`s to the cluster's
//! operator credentials Secret, never in the spec) and the CA bundle the operator trusts for
//! that cluster (certificates are public: an environment variable). They run under the
//! restricted Pod Security profile, without a service account token, once (`backoffLimit: 0`,
//! bounded by `activeDeadlineSeconds`), and are owned by their Backup or Restore.

use std::collections::BTreeMap;

use common_crds::Backup;
use common_crds::backup::BackupVolume;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::build::pod::{
    helper_resources, image_pull_secrets, restricted_container, restricted_pod, secret_env,
    termination_message,
};
use crate::certificates::objects::{TLS_CERT_KEY, TLS_KEY_KEY};

/// Where a Job mounts the claim.
pub const MOUNT_PATH: &str = "/archive";
/// Size of a Backup's claim when `spec.volume.storage` is not given (infinispan-operator's).
pub const DEFAULT_SIZE: &str = "1Gi";
/// Label of the Jobs' pods naming their cluster: the cluster's NetworkPolicy lets them reach
/// the endpoint.
pub const ARCHIVE_OF_LABEL: &str = "infinispan.org/archive-of";
/// Label of a Backup's claim naming the Backup.
pub const BACKUP_LABEL: &str = "infinispan.org/backup";
/// Label of a Backup's claim naming the cluster backed up (a Restore naming the claim in
/// `spec.source` is held to the target's `acceptRestoresFrom` as if it named the Backup).
pub const BACKED_UP_CLUSTER_LABEL: &str = "infinispan.org/backup-of";
/// `app.kubernetes.io/name` of the Jobs and their pods (never `infinispan`: no Service of the
/// cluster selects them); the controllers watch the Jobs by it.
pub const JOB_APP_NAME: &str = "infinispan-archive";
/// Environment variables of the Jobs: the operators' credentials and the CA bundle.
pub const USERNAME_ENV: &str = "ARCHIVE_USERNAME";
pub const PASSWORD_ENV: &str = "ARCHIVE_PASSWORD";
pub const CA_ENV: &str = "ARCHIVE_CA_PEM";
/// The operators' client certificate chain and key (PEM), when the cluster asks for one.
pub const CLIENT_CERT_ENV: &str = "ARCHIVE_CLIENT_CERT_PEM";
pub const CLIENT_KEY_ENV: &str = "ARCHIVE_CLIENT_KEY_PEM";
/// A Job runs at most this long.
pub const JOB_DEADLINE_SECONDS: i64 = 3600;
/// A finished Job left behind (the operator deletes it once its CR recorded the outcome) goes
/// after this long.
pub const JOB_TTL_SECONDS: i32 = 3600;

/// `<name>/<name>.zip`: where a Backup's archive is on its claim (infinispan-operator's layout).
pub fn archive_path(backup: &str) -> String {
    format!("{backup}/{backup}.zip")
}

/// `pvc/<claim>:<path>`, the status' `archive` for people.
pub fn archive_label(claim: &str, path: &str) -> String {
    format!("pvc/{claim}:{path}")
}

/// A name of at most 63 characters (a label value: the Job controller labels its pods with the
/// Job's name) for the object `suffix` of `owner` (with `uid`): `<owner>-<suffix>`, or, when
/// longer, its start and 8 hex digits of SHA-256 over owner and uid.
pub fn job_name(owner: &str, uid: &str, suffix: &str) -> String {
    let whole = format!("{owner}-{suffix}");
    if whole.len() <= 63 {
        return whole;
    }
    let digest = Sha256::digest(format!("{owner}\0{uid}").as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let keep = 63 - suffix.len() - hex.len() - 2;
    let start: String = owner.chars().take(keep).collect();
    format!("{}-{hex}-{suffix}", start.trim_end_matches(['-', '.']))
}

/// The claim of a Backup (`storage: Volume`): named like the Backup, `ReadWriteOnce`, its
/// size and class from `spec.volume`; owned by the Backup unless it retains its archive.
pub fn claim(backup: &Backup, owner: &OwnerReference) -> PersistentVolumeClaim {
    let name = backup.metadata.name.clone().unwrap_or_default();
    let volume = backup.spec.volume.clone().unwrap_or_default();
    let BackupVolume {
        storage,
        storage_class_name,
    } = volume;
    let labels = BTreeMap::from([
        (BACKUP_LABEL.to_string(), name.clone()),
        (
            BACKED_UP_CLUSTER_LABEL.to_string(),
            backup.spec.cluster.clone(),
        ),
        (
            "app.kubernetes.io/managed-by".to_string(),
            common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
        ),
    ]);
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: backup.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: backup.spec.deletes_archive().then(|| vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    storage.unwrap_or_else(|| Quantity(DEFAULT_SIZE.to_string())),
                )])),
                limits: None,
            }),
            storage_class_name,
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// Whether an existing claim of a Backup's name is that Backup's (its label), so it is adopted
/// after an operator restart rather than taken for someone else's.
pub fn claim_is_backups(claim: &PersistentVolumeClaim, backup: &str) -> bool {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(BACKUP_LABEL))
        .is_some_and(|b| b == backup)
}

/// The cluster whose Backup wrote a claim (its label), if one of ours did.
pub fn claim_backed_up_cluster(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(BACKED_UP_CLUSTER_LABEL))
        .map(String::as_str)
}

/// What a copy Job does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Copy {
    /// Saves the server's backup job `job` to `path` on the claim.
    Save { job: String, path: String },
    /// Restores `path` of the claim into the server as restore job `job`, with the selection
    /// `resources` (the Restore's `spec.resources` as JSON, absent: everything).
    Restore {
        job: String,
        path: String,
        resources: Option<String>,
    },
}

/// Everything a copy Job is made of.
#[derive(Clone, Debug)]
pub struct CopyJob<'a> {
    pub name: String,
    pub namespace: &'a str,
    /// The Backup or Restore.
    pub owner: OwnerReference,
    /// The cluster whose pod 0 the Job talks to.
    pub cluster: &'a str,
    pub image: &'a str,
    pub image_pull_secrets: &'a [String],
    pub claim: &'a str,
    /// Pod 0's URL and the name its certificate carries.
    pub url: &'a str,
    pub tls_server_name: Option<&'a str>,
    /// The operators' credentials Secret of the cluster (`username`, `password`).
    pub credentials_secret: Option<&'a str>,
    pub ca_pem: Option<&'a str>,
    /// The operators' client certificate Secret (`tls.crt`, `tls.key`), when the cluster asks
    /// clients for a certificate.
    pub client_certificate_secret: Option<&'a str>,
    pub copy: Copy,
}

impl CopyJob<'_> {
    /// The Job.
    pub fn build(&self) -> Job {
        let mut args = vec!["archive".to_string()];
        let read_only = match &self.copy {
            Copy::Save { job, path } => {
                args.extend(["save".into(), "--job".into(), job.clone()]);
                args.extend(["--to".into(), format!("{MOUNT_PATH}/{path}")]);
                false
            }
            Copy::Restore {
                job,
                path,
                resources,
            } => {
                args.extend(["restore".into(), "--job".into(), job.clone()]);
                args.extend(["--from".into(), format!("{MOUNT_PATH}/{path}")]);
                if let Some(resources) = resources {
                    args.extend(["--resources".into(), resources.clone()]);
                }
                true
            }
        };
        args.extend(["--url".into(), self.url.to_string()]);
        if let Some(name) = self.tls_server_name {
            args.extend(["--tls-server-name".into(), name.to_string()]);
        }
        let mut env = Vec::new();
        if let Some(secret) = self.credentials_secret {
            env.push(secret_env(USERNAME_ENV, secret, "username"));
            env.push(secret_env(PASSWORD_ENV, secret, "password"));
        }
        if let Some(secret) = self.client_certificate_secret {
            env.push(secret_env(CLIENT_CERT_ENV, secret, TLS_CERT_KEY));
            env.push(secret_env(CLIENT_KEY_ENV, secret, TLS_KEY_KEY));
        }
        if let Some(ca) = self.ca_pem {
            env.push(EnvVar {
                name: CA_ENV.to_string(),
                value: Some(ca.to_string()),
                value_from: None,
            });
        }
        let labels = BTreeMap::from([
            (
                "app.kubernetes.io/name".to_string(),
                JOB_APP_NAME.to_string(),
            ),
            (
                "app.kubernetes.io/managed-by".to_string(),
                common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
            ),
            (ARCHIVE_OF_LABEL.to_string(), self.cluster.to_string()),
        ]);
        let resources = helper_resources("50m", "64Mi", "256Mi");
        let container = Container {
            name: "archive".to_string(),
            image: Some(self.image.to_string()),
            args: Some(args),
            env: Some(env),
            resources: Some(resources),
            security_context: Some(restricted_container(true)),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            volume_mounts: Some(vec![VolumeMount {
                name: "archive".to_string(),
                mount_path: MOUNT_PATH.to_string(),
                read_only: read_only.then_some(true),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        };
        Job {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.to_string()),
                labels: Some(labels.clone()),
                owner_references: Some(vec![self.owner.clone()]),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                active_deadline_seconds: Some(JOB_DEADLINE_SECONDS),
                ttl_seconds_after_finished: Some(JOB_TTL_SECONDS),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".to_string()),
                        automount_service_account_token: Some(false),
                        security_context: Some(restricted_pod(None)),
                        containers: vec![container],
                        image_pull_secrets: image_pull_secrets(self.image_pull_secrets),
                        volumes: Some(vec![Volume {
                            name: "archive".to_string(),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: self.claim.to_string(),
                                read_only: read_only.then_some(true),
                            }),
                            ..Volume::default()
                        }]),
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            status: None,
        }
    }
}

/// What a copy Job reports in its termination message (JSON, one line).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Report {
    /// The archive is on the claim.
    Saved { bytes: u64, sha256: String },
    /// The server's restore job was started (or found started).
    Started { note: String },
    /// It could not be done; `reason` is a Failure reason of the Backup or Restore.
    Failed { reason: String, message: String },
}

/// Where a copy Job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Not finished (or its pod not yet started).
    Running,
    /// Finished; what it reported.
    Finished(Report),
}

/// The state of a copy Job from the Job and its pods (pure). A Job that failed without a
/// readable report (killed, deadline, image not pulled) gets one with the Job's own reason.
pub fn job_state(job: &Job, pods: &[Pod]) -> JobState {
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let finished = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    };
    let complete = finished("Complete");
    let failed = finished("Failed");
    if complete.is_none() && failed.is_none() {
        return JobState::Running;
    }
    let message = termination_message(pods);
    let report = message.as_deref().and_then(|m| {
        m.lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Report>(line.trim()).ok())
    });
    match (report, failed) {
        (Some(report), _) => JobState::Finished(report),
        (None, Some(condition)) => JobState::Finished(Report::Failed {
            reason: "CopyFailed".to_string(),
            message: format!(
                "the Job failed ({}: {}){}",
                condition.reason.as_deref().unwrap_or("no reason"),
                condition.message.as_deref().unwrap_or(""),
                message
                    .map(|m| format!("; its pod said: {}", last_chars(&m, 600)))
                    .unwrap_or_default()
            ),
        }),
        (None, None) => JobState::Finished(Report::Failed {
            reason: "CopyFailed".to_string(),
            message: "the Job completed without a report in its pod's termination message"
                .to_string(),
        }),
    }
}

fn last_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::BackupSpec;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };
    use serde_json::json;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "infinispan.org/v2alpha1".into(),
            kind: "Backup".into(),
            name: "nightly".into(),
            uid: "u-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn backup(spec: serde_json::Value) -> Backup {
        let spec: BackupSpec = serde_json::from_value(spec).expect("spec");
        let mut backup = Backup::new("nightly", spec);
        backup.metadata.namespace = Some("team".into());
        backup
    }

    #[test]
    fn the_claim_is_named_like_the_backup_sized_and_owned_unless_retained() {
        let claim = serde_json::to_value(claim(&backup(json!({"cluster": "demo"})), &owner()))
            .expect("json");
        assert_eq!(claim["metadata"]["name"], "nightly");
        assert_eq!(claim["metadata"]["labels"][BACKUP_LABEL], "nightly");
        assert_eq!(claim["metadata"]["labels"][BACKED_UP_CLUSTER_LABEL], "demo");
        assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
        assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        assert!(claim["spec"].get("storageClassName").is_none());

        let retained = backup(json!({"cluster": "demo", "deletionPolicy": "Retain",
            "volume": {"storage": "5Gi", "storageClassName": "fast"}}));
        let claim = serde_json::to_value(super::claim(&retained, &owner())).expect("json");
        assert!(
            claim["metadata"].get("ownerReferences").is_none(),
            "{claim}"
        );
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "5Gi");
        assert_eq!(claim["spec"]["storageClassName"], "fast");
    }

    #[test]
    fn archives_have_infinispan_operators_layout() {
        assert_eq!(archive_path("nightly"), "nightly/nightly.zip");
        assert_eq!(
            archive_label("nightly", "nightly/nightly.zip"),
            "pvc/nightly:nightly/nightly.zip"
        );
    }

    #[test]
    fn job_names_fit_a_label_value_and_stay_apart() {
        assert_eq!(job_name("nightly", "u", "archive"), "nightly-archive");
        let long = "a".repeat(70);
        let one = job_name(&long, "u-1", "archive");
        let two = job_name(&long, "u-2", "archive");
        assert!(one.len() <= 63 && two.len() <= 63, "{one} {two}");
        assert!(one.ends_with("-archive"));
        assert_ne!(one, two);
        assert_eq!(one, job_name(&long, "u-1", "archive"));
    }

    fn save_job() -> Job {
        CopyJob {
            name: "nightly-archive".into(),
            namespace: "team",
            owner: owner(),
            cluster: "demo",
            image: "example/cluster-operator:1",
            image_pull_secrets: &["pull".to_string()],
            claim: "nightly",
            url: "https://demo-0.demo-ping.team.svc.cluster.local:11222",
            tls_server_name: Some("demo.team.svc.cluster.local"),
            credentials_secret: Some("demo-operator-credentials"),
            ca_pem: Some("-----BEGIN CERTIFICATE-----\n"),
            client_certificate_secret: None,
            copy: Copy::Save {
                job: "team.nightly-0123".into(),
                path: archive_path("nightly"),
            },
        }
        .build()
    }

    #[test]
    fn a_save_job_runs_once_restricted_with_credentials_from_the_secret_only() {
        let job = serde_json::to_value(save_job()).expect("json");
        let spec = &job["spec"];
        assert_eq!(spec["backoffLimit"], 0);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "pull"}]));
        let container = &pod["containers"][0];
        assert_eq!(
            container["args"],
            json!([
                "archive",
                "save",
                "--job",
                "team.nightly-0123",
                "--to",
                "/archive/nightly/nightly.zip",
                "--url",
                "https://demo-0.demo-ping.team.svc.cluster.local:11222",
                "--tls-server-name",
                "demo.team.svc.cluster.local"
            ])
        );
        assert_eq!(
            container["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        let env = container["env"].as_array().expect("env");
        let password = env
            .iter()
            .find(|e| e["name"] == PASSWORD_ENV)
            .expect("password");
        assert_eq!(
            password["valueFrom"]["secretKeyRef"],
            json!({"name": "demo-operator-credentials", "key": "password", "optional": false})
        );
        assert!(password.get("value").is_none());
        assert!(container["volumeMounts"][0].get("readOnly").is_none());
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "nightly"
        );
        // Its pods are not the cluster's (no Service selects them) but are let in.
        let labels = &spec["template"]["metadata"]["labels"];
        assert_eq!(labels[ARCHIVE_OF_LABEL], "demo");
        assert_ne!(labels["app.kubernetes.io/name"], "infinispan");
    }

    #[test]
    fn a_restore_job_mounts_the_claim_read_only() {
        let mut job = CopyJob {
            copy: Copy::Restore {
                job: "team.r-1".into(),
                path: "old/old.zip".into(),
                resources: Some(r#"{"caches":["a"]}"#.into()),
            },
            ..CopyJob {
                name: "r-upload".into(),
                namespace: "team",
                owner: owner(),
                cluster: "demo",
                image: "i",
                image_pull_secrets: &[],
                claim: "old",
                url: "http://demo-0:11222",
                tls_server_name: None,
                credentials_secret: None,
                ca_pem: None,
                client_certificate_secret: None,
                copy: Copy::Save {
                    job: String::new(),
                    path: String::new(),
                },
            }
        }
        .build();
        let value = serde_json::to_value(&mut job).expect("json");
        let pod = &value["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
        assert_eq!(pod["containers"][0]["volumeMounts"][0]["readOnly"], true);
        assert_eq!(
            pod["containers"][0]["args"],
            json!([
                "archive",
                "restore",
                "--job",
                "team.r-1",
                "--from",
                "/archive/old/old.zip",
                "--resources",
                r#"{"caches":["a"]}"#,
                "--url",
                "http://demo-0:11222"
            ])
        );
        assert!(pod.get("imagePullSecrets").is_none());
    }

    fn finished(type_: &str, message: Option<&str>) -> (Job, Vec<Pod>) {
        let mut job = save_job();
        job.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: type_.into(),
                status: "True".into(),
                reason: Some("BackoffLimitExceeded".into()),
                message: Some("Job has reached the specified backoff limit".into()),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        let pod = Pod {
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            message: message.map(str::to_string),
                            ..ContainerStateTerminated::default()
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        (job, vec![pod])
    }

    #[test]
    fn a_finished_job_is_read_from_its_pods_termination_message() {
        assert_eq!(job_state(&save_job(), &[]), JobState::Running);
        let (job, pods) = finished(
            "Complete",
            Some(r#"{"outcome":"saved","bytes":12,"sha256":"ab"}"#),
        );
        assert_eq!(
            job_state(&job, &pods),
            JobState::Finished(Report::Saved {
                bytes: 12,
                sha256: "ab".into()
            })
        );
        let (job, pods) = finished(
            "Failed",
            Some(
                "some log\n{\"outcome\":\"failed\",\"reason\":\"InvalidSelection\",\"message\":\"no cache x\"}",
            ),
        );
        assert_eq!(
            job_state(&job, &pods),
            JobState::Finished(Report::Failed {
                reason: "InvalidSelection".into(),
                message: "no cache x".into()
            })
        );
        let (job, pods) = finished("Failed", Some("panicked at main.rs"));
        let JobState::Finished(Report::Failed { reason, message }) = job_state(&job, &pods) else {
            panic!("not failed");
        };
        assert_eq!(reason, "CopyFailed");
        assert!(
            message.contains("BackoffLimitExceeded") && message.contains("panicked"),
            "{message}"
        );
    }
}
