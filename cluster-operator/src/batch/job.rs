//! The Job of a Batch (pure): the Infinispan CLI of the cluster's server image, connected as the
//! operators' user to the client Service, running the script of the Batch's ConfigMap; and what
//! its finished pod says ([`outcome`]).
//!
//! The CLI of 16.0.7 exits 0 even when a command of the script fails (measured: a `create
//! cache` of an unknown template prints `Error: ISPN000374...` and the batch goes on), so the
//! Job's shell reads its output: a line starting with `Error`, or saying the credentials are
//! invalid or a command is not available (not connected), fails the Job, and those lines are its
//! termination message. The password is written into the script file in the pod's memory-backed
//! scratch directory, never into the Job's spec, an argument or the output.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, Pod, PodSpec, PodTemplateSpec,
    SecretVolumeSource, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{BATCH_OF_LABEL, JOB_APP_NAME};
use crate::build::pod::{
    helper_resources, image_pull_secrets, mount, restricted_container, restricted_pod, secret_env,
    termination_message,
};
use crate::certificates::objects::CA_CERT_KEY;

/// Where the script's ConfigMap is mounted (the CLI runs there: relative `--file=` names
/// resolve beside the script).
/// infinispan-operator's place, so that scripts naming `/etc/batch/<file>` keep working.
pub const SCRIPT_DIR: &str = "/etc/batch";
/// Where the CA of the endpoint certificate is mounted, when there is one.
pub const CA_DIR: &str = "/etc/batch-ca";
/// The Job runs at most this long.
pub const DEADLINE_SECONDS: i64 = 1800;
const USERNAME_ENV: &str = "BATCH_USERNAME";
const PASSWORD_ENV: &str = "BATCH_PASSWORD";
const URL_ENV: &str = "BATCH_URL";

/// The shell the Job runs (see the module's documentation).
const SCRIPT: &str = r#"set -u
umask 077
work=/tmp/batch
mkdir -p "$work"
trust=""
if [ -s /etc/batch-ca/ca.crt ]; then
  store_password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  keytool -importcert -noprompt -alias ca -file /etc/batch-ca/ca.crt \
    -keystore "$work/trust.p12" -storetype PKCS12 -storepass "$store_password" >/dev/null 2>&1 \
    || { echo "the CA of the endpoint certificate cannot be read" > /dev/termination-log; exit 1; }
  trust="-t $work/trust.p12 -s $store_password"
fi
printf 'connect --username=%s --password=%s %s\n' "$BATCH_USERNAME" "$BATCH_PASSWORD" "$BATCH_URL" > "$work/script"
cat /etc/batch/batch >> "$work/script"
printf '\n' >> "$work/script"
cd /etc/batch
java -Xmx160m -XX:-UsePerfData -Djava.io.tmpdir="$work" -cp '/opt/infinispan/lib/*' \
  org.infinispan.cli.commands.CLI $trust -f "$work/script" > "$work/output" 2>&1
status=$?
rm -f "$work/script"
# Colours off; a line that would hold the password (a connect line the CLI could not parse)
# never reaches the log or the status.
sed 's/\x1b\[[0-9;]*m//g' "$work/output" | grep -vF -e "$BATCH_PASSWORD" > "$work/clean"
cat "$work/clean"
failures='^(Error|CommandLineParserException|The supplied credentials are invalid|The command is not available)'
if [ "$status" -ne 0 ] || grep -qE "$failures" "$work/clean"; then
  { grep -E "$failures" "$work/clean" || tail -n 20 "$work/clean"; } | head -c 3000 > /dev/termination-log
  exit 1
fi
"#;

/// Everything a Batch Job is made of.
#[derive(Clone, Debug)]
pub struct BatchJob<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The Batch.
    pub owner: OwnerReference,
    pub cluster: &'a str,
    /// The cluster's server image (it holds the CLI).
    pub image: &'a str,
    pub image_pull_secrets: &'a [String],
    /// The client Service's URL.
    pub url: &'a str,
    /// The operators' credentials Secret (`username`, `password`).
    pub credentials_secret: &'a str,
    /// The endpoint certificate Secret, whose `ca.crt` is trusted when it has one.
    pub ca_secret: Option<&'a str>,
    /// The ConfigMap with the script in [`super::SCRIPT_KEY`].
    pub script_config_map: &'a str,
}

impl BatchJob<'_> {
    /// The Job.
    pub fn build(&self) -> Job {
        let labels = BTreeMap::from([
            (
                "app.kubernetes.io/name".to_string(),
                JOB_APP_NAME.to_string(),
            ),
            (
                "app.kubernetes.io/managed-by".to_string(),
                common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
            ),
            (BATCH_OF_LABEL.to_string(), self.cluster.to_string()),
        ]);
        let mut volumes = vec![
            Volume {
                name: "script".to_string(),
                config_map: Some(ConfigMapVolumeSource {
                    name: self.script_config_map.to_string(),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "work".to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".to_string()),
                    size_limit: Some(Quantity("64Mi".to_string())),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            },
        ];
        let mut mounts = vec![
            mount("script", SCRIPT_DIR, true),
            mount("work", "/tmp", false),
        ];
        if let Some(secret) = self.ca_secret {
            volumes.push(Volume {
                name: "ca".to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.to_string()),
                    items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                        key: CA_CERT_KEY.to_string(),
                        path: CA_CERT_KEY.to_string(),
                        ..Default::default()
                    }]),
                    // A user's certificate Secret without a CA: the JVM's own roots.
                    optional: Some(true),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount("ca", CA_DIR, true));
        }
        let container = Container {
            name: "cli".to_string(),
            image: Some(self.image.to_string()),
            command: Some(vec![
                "/bin/sh".to_string(),
                "-c".to_string(),
                SCRIPT.to_string(),
            ]),
            env: Some(vec![
                secret_env(USERNAME_ENV, self.credentials_secret, "username"),
                secret_env(PASSWORD_ENV, self.credentials_secret, "password"),
                EnvVar {
                    name: URL_ENV.to_string(),
                    value: Some(self.url.to_string()),
                    value_from: None,
                },
                // The root filesystem is read-only: the CLI's home is the scratch directory.
                EnvVar {
                    name: "HOME".to_string(),
                    value: Some("/tmp".to_string()),
                    value_from: None,
                },
            ]),
            resources: Some(helper_resources("100m", "256Mi", "384Mi")),
            security_context: Some(restricted_container(true)),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            volume_mounts: Some(mounts),
            ..Container::default()
        };
        Job {
            metadata: ObjectMeta {
                name: Some(self.name.to_string()),
                namespace: Some(self.namespace.to_string()),
                labels: Some(labels.clone()),
                owner_references: Some(vec![self.owner.clone()]),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                active_deadline_seconds: Some(DEADLINE_SECONDS),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".to_string()),
                        automount_service_account_token: Some(false),
                        enable_service_links: Some(false),
                        security_context: Some(restricted_pod(None)),
                        containers: vec![container],
                        image_pull_secrets: image_pull_secrets(self.image_pull_secrets),
                        volumes: Some(volumes),
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            status: None,
        }
    }
}

/// What a Batch's Job came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not finished: `true` once its pod runs.
    Running(bool),
    Succeeded,
    /// The CLI's error lines (or the Job's reason).
    Failed(String),
}

/// The outcome of `job` and its `pods`.
pub fn outcome(job: &Job, pods: &[Pod]) -> Outcome {
    let status = job.status.clone().unwrap_or_default();
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True")
            .cloned()
    };
    if condition("Complete").is_some() || status.succeeded.unwrap_or(0) > 0 {
        return Outcome::Succeeded;
    }
    let failed = condition("Failed");
    if failed.is_none() && status.failed.unwrap_or(0) == 0 {
        return Outcome::Running(status.active.unwrap_or(0) > 0 || status.ready.unwrap_or(0) > 0);
    }
    Outcome::Failed(termination_message(pods).unwrap_or_else(|| {
        let reason = failed
            .as_ref()
            .and_then(|c| c.message.clone().or(c.reason.clone()))
            .unwrap_or_else(|| "its pod failed".to_string());
        format!("the Job failed: {reason}")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };

    fn job() -> Job {
        BatchJob {
            name: "setup",
            namespace: "team-a",
            owner: OwnerReference {
                api_version: "infinispan.org/v2alpha1".into(),
                kind: "Batch".into(),
                name: "setup".into(),
                uid: "uid-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            cluster: "demo",
            image: "quay.io/infinispan/server:16.0.7",
            image_pull_secrets: &[],
            url: "https://demo.team-a.svc.cluster.local:11222",
            credentials_secret: "demo-operator-credentials",
            ca_secret: Some("demo-endpoint-tls"),
            script_config_map: "setup-batch",
        }
        .build()
    }

    #[test]
    fn the_job_runs_the_cli_of_the_server_image_as_the_operators_user_without_a_password_in_its_spec()
     {
        let job = job();
        let pod = job.spec.clone().expect("spec").template.spec.expect("pod");
        crate::build::test_support::assert_restricted(&pod);
        assert_eq!(pod.automount_service_account_token, Some(false));
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("quay.io/infinispan/server:16.0.7")
        );
        let env = container.env.clone().unwrap_or_default();
        let password = env
            .iter()
            .find(|e| e.name == PASSWORD_ENV)
            .expect("the password variable");
        assert!(password.value.is_none(), "from the Secret only");
        assert_eq!(
            password
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .map(|s| s.name.as_str()),
            Some("demo-operator-credentials")
        );
        let spec = serde_json::to_string(&job).expect("JSON");
        assert!(spec.contains("org.infinispan.cli.commands.CLI"));
        let labels = job.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[BATCH_OF_LABEL], "demo");
        let volumes = pod.volumes.unwrap_or_default();
        assert!(volumes.iter().any(|v| {
            v.config_map
                .as_ref()
                .is_some_and(|c| c.name == "setup-batch")
        }));
        assert!(volumes.iter().any(|v| {
            v.secret.as_ref().is_some_and(|s| {
                s.secret_name.as_deref() == Some("demo-endpoint-tls") && s.optional == Some(true)
            })
        }));
        assert_eq!(
            job.spec.and_then(|s| s.backoff_limit),
            Some(0),
            "a script runs once"
        );
    }

    fn finished(type_: &str, message: Option<&str>) -> (Job, Vec<Pod>) {
        let job = Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: type_.into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        };
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
    fn the_outcome_is_the_jobs_with_the_clis_error_lines() {
        let (job, pods) = finished("Complete", None);
        assert_eq!(outcome(&job, &pods), Outcome::Succeeded);
        let (job, pods) = finished(
            "Failed",
            Some("Error: ISPN000374: No such template 'nope' when declaring 'c'\n"),
        );
        assert_eq!(
            outcome(&job, &pods),
            Outcome::Failed("Error: ISPN000374: No such template 'nope' when declaring 'c'".into())
        );
        let (job, _) = finished("Failed", None);
        assert!(matches!(outcome(&job, &[]), Outcome::Failed(m) if m.contains("the Job failed")));
        assert_eq!(outcome(&Job::default(), &[]), Outcome::Running(false));
    }
}
