//! The server's StatefulSet: the server container (image, arguments, environment, ports,
//! probes, resources), the TLS init container that writes the PEM keystore, the volumes (the
//! configuration, the identities, the TLS material, the data claim or emptyDir), the restricted
//! security contexts, the scheduling and the config hash that rolls the pods.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SecretVolumeSource, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::credential_store::{self, CredentialStore};
use super::inputs::Cx;
use super::{
    ARTIFACTS_INIT_CONTAINER_NAME, CONFIG_DIR, CONFIG_HASH_ANNOTATION, CONFIG_VOLUME,
    CONTAINER_NAME, CREDENTIAL_SOURCE_VOLUME, CREDENTIAL_STORE_VOLUME, DATA_DIR, DATA_VOLUME,
    DEPENDENCIES_VOLUME, IDENTITIES_DIR, IDENTITIES_VOLUME, JGROUPS_FD_PORT, JGROUPS_PORT,
    JGROUPS_PORT_NAME, KEYSTORE_P12_KEY, KEYSTORE_PASSWORD_ENV, KEYSTORE_PASSWORD_KEY,
    LOGGING_CONFIG_KEY, PEM_FILE, PROBES_PORT, PROBES_PORT_NAME, SERVER_CONFIG_KEY,
    SERVER_LIB_VOLUME, SERVER_PORT, SERVER_PORT_NAME, TLS_CERT_KEY, TLS_DIR,
    TLS_INIT_CONTAINER_NAME, TLS_KEY_KEY, TLS_SECRET_DIR, TLS_SECRET_VOLUME, TLS_VOLUME,
    TRANSPORT_TLS_DIR, TRANSPORT_TLS_PASSWORD_ENV, TRANSPORT_TLS_VOLUME, config_hash,
    config_map_name, identities_secret_name, labels, ping_service_name, selector_labels,
    stateful_set_name,
};
use crate::artifacts::{Plan, SERVER_LIB_DIR, VOLUME_SUBDIR};
use crate::build::pod::{
    container_port, field_env, helper_resources, http_probe, image_pull_secrets, mount, non_empty,
    restricted_container, restricted_pod, secret_env, secret_volume, tuned,
};
use crate::build::security::{self, SECURITY_ANNOTATION};
use crate::certificates::objects::{KEYSTORE_KEY, STORE_PASSWORD_KEY, TRUSTSTORE_KEY};

impl Cx<'_> {
    pub(super) fn stateful_set(&self, config_map: &ConfigMap) -> StatefulSet {
        let resources = self
            .cluster
            .spec
            .container
            .as_ref()
            .and_then(|container| container.resources.clone())
            .unwrap_or_else(|| self.settings.default_resources.clone());
        let (mut volumes, mut mounts) = self.configuration_volumes();
        let mut init_containers = Vec::new();
        if let Some((secret, certificate)) = &self.tls {
            if certificate.pkcs12_alias().is_some() {
                // The server reads the user's PKCS#12 keystore itself: no PEM to assemble.
                volumes.push(secret_volume(
                    TLS_VOLUME,
                    secret.clone(),
                    &[KEYSTORE_P12_KEY],
                ));
            } else {
                volumes.extend(tls_volumes(secret));
                init_containers.push(self.tls_init_container(resources.clone()));
            }
            mounts.push(mount(TLS_VOLUME, TLS_DIR, true));
        }
        if let Some(plan) = &self.artifacts {
            // The init container writes the libraries; the server reads them.
            volumes.push(Volume {
                name: SERVER_LIB_VOLUME.to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(Quantity(format!(
                        "{}Mi",
                        crate::artifacts::MAX_TOTAL_BYTES / (1024 * 1024)
                    ))),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount(SERVER_LIB_VOLUME, SERVER_LIB_DIR, true));
            init_containers.push(self.artifacts_init_container(plan));
        }
        if let Some(claim) = self.dependencies_claim() {
            volumes.push(Volume {
                name: DEPENDENCIES_VOLUME.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.to_string(),
                    read_only: Some(true),
                }),
                ..Volume::default()
            });
            mounts.push(mount(
                DEPENDENCIES_VOLUME,
                &format!("{SERVER_LIB_DIR}/{VOLUME_SUBDIR}"),
                true,
            ));
        }
        if let Some(transport) = self.transport {
            volumes.push(secret_volume(
                TRANSPORT_TLS_VOLUME,
                transport.secret.clone(),
                &[KEYSTORE_KEY, TRUSTSTORE_KEY],
            ));
            mounts.push(mount(TRANSPORT_TLS_VOLUME, TRANSPORT_TLS_DIR, true));
        }
        if let Some(store) = self.credential_store {
            // The user's Secret reaches the init container only; the server reads the store.
            // Exactly the keys the operator checked.
            let keys: Vec<&str> = store.aliases.iter().map(String::as_str).collect();
            volumes.push(secret_volume(
                CREDENTIAL_SOURCE_VOLUME,
                store.secret.clone(),
                &keys,
            ));
            volumes.push(Volume {
                name: CREDENTIAL_STORE_VOLUME.to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".to_string()),
                    size_limit: Some(Quantity("16Mi".to_string())),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount(
                CREDENTIAL_STORE_VOLUME,
                credential_store::STORE_DIR,
                true,
            ));
            init_containers.push(self.credential_store_init_container(store));
        }
        let (site_volumes, site_mounts, _) = self.site_tls_pod_parts();
        volumes.extend(site_volumes);
        mounts.extend(site_mounts);
        mounts.push(mount(DATA_VOLUME, DATA_DIR, false));
        let volume_claim_templates = self.data_storage(&mut volumes);
        let container = self.server_container(resources, mounts);
        let hash = config_hash(
            config_map,
            self.tls.as_ref().map(|(_, certificate)| *certificate),
            self.transport.map(|transport| transport.digest.as_str()),
            self.dependencies_digest().as_deref(),
            self.credential_store.map(|store| store.digest.as_str()),
            self.sites
                .as_ref()
                .and_then(|sites| sites.tls.as_ref())
                .map(|tls| tls.digest.as_str()),
        );
        let mut pod_metadata = ObjectMeta {
            labels: Some(labels(self.name)),
            annotations: Some(BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_string(), hash)])),
            ..ObjectMeta::default()
        };
        self.user.pods.apply_to(&mut pod_metadata);
        let template = PodTemplateSpec {
            metadata: Some(pod_metadata),
            spec: Some(self.pod_spec(init_containers, container, volumes)),
        };

        let mut metadata = self.metadata(stateful_set_name(self.name));
        // What an absent TLS type means for this cluster from now on (`build::security`).
        metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                SECURITY_ANNOTATION.to_string(),
                security::types(self.cluster).annotation(),
            );
        StatefulSet {
            metadata,
            spec: StatefulSetSpec {
                replicas: Some(self.cluster.spec.replicas),
                selector: LabelSelector {
                    match_labels: Some(selector_labels(self.name)),
                    match_expressions: None,
                },
                service_name: Some(ping_service_name(self.name)),
                pod_management_policy: Some("Parallel".to_string()),
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: Some("Delete".to_string()),
                        when_scaled: Some("Retain".to_string()),
                    },
                ),
                template,
                volume_claim_templates,
                ..StatefulSetSpec::default()
            },
            status: None,
        }
    }

    /// The server ConfigMap's volume and, with authentication, the identities Secret's, with
    /// their (read-only) mounts in the server container.
    fn configuration_volumes(&self) -> (Vec<Volume>, Vec<VolumeMount>) {
        let mut volumes = vec![Volume {
            name: CONFIG_VOLUME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name(self.name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }];
        let mut mounts = vec![mount(CONFIG_VOLUME, CONFIG_DIR, true)];
        if self.identities.is_some() {
            volumes.push(Volume {
                name: IDENTITIES_VOLUME.to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(identities_secret_name(self.name)),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount(IDENTITIES_VOLUME, IDENTITIES_DIR, true));
        }
        (volumes, mounts)
    }

    /// The init container that writes `server.pem` (key, then certificate chain) from the
    /// user's TLS Secret into the in-memory volume.
    fn tls_init_container(&self, resources: ResourceRequirements) -> Container {
        let script = format!(
            "set -eu; umask 077; {{ cat {TLS_SECRET_DIR}/{TLS_KEY_KEY}; echo; cat {TLS_SECRET_DIR}/{TLS_CERT_KEY}; }} > {TLS_DIR}/{PEM_FILE}"
        );
        Container {
            name: TLS_INIT_CONTAINER_NAME.to_string(),
            image: Some(self.image.image.clone()),
            command: Some(vec!["/bin/sh".to_string(), "-c".to_string(), script]),
            resources: Some(resources),
            security_context: Some(restricted_container(false)),
            volume_mounts: Some(vec![
                mount(TLS_SECRET_VOLUME, TLS_SECRET_DIR, true),
                mount(TLS_VOLUME, TLS_DIR, false),
            ]),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        }
    }

    /// The init container of the operator's image that downloads `plan`'s artifacts, checks
    /// them and places them in the lib directory (`cluster-operator artifacts fetch`): no
    /// token, no credentials, the restricted profile, a read-only root filesystem.
    fn artifacts_init_container(&self, plan: &Plan) -> Container {
        Container {
            name: ARTIFACTS_INIT_CONTAINER_NAME.to_string(),
            image: Some(self.settings.artifacts_image.clone()),
            args: Some(vec![
                "artifacts".to_string(),
                "fetch".to_string(),
                format!("--into={SERVER_LIB_DIR}"),
                format!("--plan={}", plan.to_json()),
            ]),
            resources: Some(helper_resources("50m", "64Mi", "256Mi")),
            security_context: Some(restricted_container(true)),
            volume_mounts: Some(vec![mount(SERVER_LIB_VOLUME, SERVER_LIB_DIR, false)]),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        }
    }

    /// The init container of the server image that writes the credential store from the
    /// user's Secret with the server's CLI ([`credential_store::script`]): read-only root
    /// filesystem, the restricted profile, the store's password from the operator's Secret.
    fn credential_store_init_container(&self, store: &CredentialStore) -> Container {
        Container {
            name: credential_store::INIT_CONTAINER_NAME.to_string(),
            image: Some(self.image.image.clone()),
            command: Some(vec![
                "/bin/sh".to_string(),
                "-c".to_string(),
                credential_store::script(store.aliases.len()),
            ]),
            env: Some(vec![self.credential_store_password_env()]),
            resources: Some(helper_resources("100m", "256Mi", "384Mi")),
            security_context: Some(restricted_container(true)),
            volume_mounts: Some(vec![
                mount(CREDENTIAL_SOURCE_VOLUME, credential_store::SOURCE_DIR, true),
                mount(CREDENTIAL_STORE_VOLUME, credential_store::STORE_DIR, false),
            ]),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        }
    }

    /// The credential store's password, from the operator's Secret.
    fn credential_store_password_env(&self) -> EnvVar {
        secret_env(
            credential_store::PASSWORD_ENV,
            &credential_store::password_secret_name(self.name),
            credential_store::PASSWORD_KEY,
        )
    }

    /// `spec.dependencies.volumeClaimName`, when set.
    fn dependencies_claim(&self) -> Option<&str> {
        self.cluster
            .spec
            .dependencies
            .as_ref()
            .and_then(|d| d.volume_claim_name.as_deref())
            .filter(|claim| !claim.is_empty())
    }

    /// What of `spec.dependencies` rolls the pods: the plan and the claim's name.
    fn dependencies_digest(&self) -> Option<String> {
        let plan = self.artifacts.as_ref().map(Plan::to_json);
        let claim = self.dependencies_claim();
        (plan.is_some() || claim.is_some()).then(|| {
            format!(
                "{}\n{}",
                plan.unwrap_or_default(),
                claim.unwrap_or_default()
            )
        })
    }

    /// The data volume: an emptyDir added to `volumes` with ephemeral storage, else the claim
    /// template returned.
    fn data_storage(&self, volumes: &mut Vec<Volume>) -> Option<Vec<PersistentVolumeClaim>> {
        let storage = &self.cluster.spec.service.container;
        if storage.ephemeral_storage {
            volumes.push(Volume {
                name: DATA_VOLUME.to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(storage.storage.clone()),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            });
            return None;
        }
        Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(DATA_VOLUME.to_string()),
                labels: Some(labels(self.name)),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_string()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        storage.storage.clone(),
                    )])),
                    limits: None,
                }),
                storage_class_name: storage.storage_class_name.clone(),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        }])
    }

    /// The server container: the image's entrypoint with [`Self::args`], [`Self::env`], the
    /// endpoint and JGroups ports, the anonymous health probes (their timing as
    /// `spec.service.container` tunes it).
    fn server_container(
        &self,
        resources: ResourceRequirements,
        mounts: Vec<VolumeMount>,
    ) -> Container {
        let scheme = if self.tls.is_some() { "HTTPS" } else { "HTTP" };
        let tuning = &self.cluster.spec.service.container;
        // The endpoint asks clients for a certificate, which the kubelet has not: the probes
        // go to the second endpoint.
        let probe_port = if self.client_trust.is_some() {
            PROBES_PORT_NAME
        } else {
            SERVER_PORT_NAME
        };
        let health = |path, period, failures| probe(probe_port, path, scheme, period, failures);
        let mut ports = vec![
            container_port(SERVER_PORT_NAME, SERVER_PORT),
            container_port(JGROUPS_PORT_NAME, JGROUPS_PORT),
            container_port("jgroups-fd", JGROUPS_FD_PORT),
        ];
        if self.client_trust.is_some() {
            ports.push(container_port(PROBES_PORT_NAME, PROBES_PORT));
        }
        Container {
            name: CONTAINER_NAME.to_string(),
            image: Some(self.image.image.clone()),
            args: Some(self.args()),
            env: Some(self.env()),
            ports: Some(ports),
            startup_probe: Some(tuned(
                health("/health/live", 5, 60),
                tuning.startup_probe.as_ref(),
            )),
            liveness_probe: Some(tuned(
                health("/health/live", 10, 6),
                tuning.liveness_probe.as_ref(),
            )),
            readiness_probe: Some(tuned(
                health("/health/ready", 10, 3),
                tuning.readiness_probe.as_ref(),
            )),
            resources: Some(resources),
            security_context: Some(restricted_container(false)),
            volume_mounts: Some(mounts),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        }
    }

    /// Bind and cluster addresses, node name, the DNS query of DNS_PING, the operator's
    /// configuration, then the overlay, then the logging configuration.
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--bind-address=0.0.0.0".to_string(),
            "--cluster-address=$(POD_IP)".to_string(),
            "--node-name=$(POD_NAME)".to_string(),
            format!("-Djgroups.dns.query={}", self.dns_query),
            format!("--server-config={CONFIG_DIR}/{SERVER_CONFIG_KEY}"),
        ];
        if let Some(overlay) = self.overlay {
            args.push(format!("--server-config={CONFIG_DIR}/{}", overlay.key()));
        }
        args.push(format!(
            "--logging-config={CONFIG_DIR}/{LOGGING_CONFIG_KEY}"
        ));
        args
    }

    /// The operator's variables, then the CR's (which replace one of the same name in place).
    fn env(&self) -> Vec<EnvVar> {
        let value = |name: &str, value: &str| EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        };
        let container = self.cluster.spec.container.as_ref();
        let mut env = vec![
            field_env("POD_IP", "status.podIP"),
            field_env("POD_NAME", "metadata.name"),
            value("MANAGED_ENV", "TRUE"),
            value("RUN_IN_CONTAINER", "true"),
        ];
        if let Some(transport) = self.transport {
            // The stores' password, read by the server configuration (`${env.…}`).
            env.push(secret_env(
                TRANSPORT_TLS_PASSWORD_ENV,
                &transport.secret,
                STORE_PASSWORD_KEY,
            ));
        }
        if let Some((secret, certificate)) = &self.tls
            && certificate.pkcs12_alias().is_some()
        {
            // The PKCS#12 keystore's password, read by the server configuration (`${env.…}`).
            env.push(secret_env(
                KEYSTORE_PASSWORD_ENV,
                secret,
                KEYSTORE_PASSWORD_KEY,
            ));
        }
        if self.credential_store.is_some() {
            // The store's password, read by the server configuration (`${env.…}`).
            env.push(self.credential_store_password_env());
        }
        // The cross-site stores' passwords, read by the server configuration (`${env.…}`).
        env.extend(self.site_tls_pod_parts().2);
        if let Some(options) = container
            .and_then(|container| container.extra_jvm_opts.as_deref())
            .map(str::trim)
            .filter(|options| !options.is_empty())
        {
            env.push(value("JAVA_OPTIONS", options));
        }
        for variable in container.iter().flat_map(|container| &container.env) {
            match env.iter_mut().find(|known| known.name == variable.name) {
                Some(known) => *known = variable.clone(),
                None => env.push(variable.clone()),
            }
        }
        env
    }

    /// The pod: no service account token, the restricted profile with the settings' fsGroup,
    /// the pull Secrets, `spec.scheduling` (a preferred spread over nodes when it sets no
    /// affinity), the termination grace period of `spec.service.container` (absent: the
    /// Kubernetes default).
    fn pod_spec(
        &self,
        init_containers: Vec<Container>,
        container: Container,
        volumes: Vec<Volume>,
    ) -> PodSpec {
        let scheduling = self.cluster.spec.scheduling.clone().unwrap_or_default();
        PodSpec {
            init_containers: non_empty(init_containers),
            containers: vec![container],
            volumes: Some(volumes),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(restricted_pod(self.settings.fs_group)),
            image_pull_secrets: image_pull_secrets(&self.settings.image_pull_secrets),
            affinity: scheduling
                .affinity
                .or_else(|| Some(self.spread_over_nodes())),
            tolerations: non_empty(scheduling.tolerations),
            node_selector: (!scheduling.node_selector.is_empty())
                .then_some(scheduling.node_selector),
            priority_class_name: scheduling.priority_class_name,
            topology_spread_constraints: non_empty(scheduling.topology_spread_constraints),
            termination_grace_period_seconds: self
                .cluster
                .spec
                .service
                .container
                .termination_grace_period_seconds,
            ..PodSpec::default()
        }
    }

    /// A preferred anti-affinity of the server pods to each other on a node.
    fn spread_over_nodes(&self) -> Affinity {
        Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    WeightedPodAffinityTerm {
                        weight: 100,
                        pod_affinity_term: PodAffinityTerm {
                            label_selector: Some(LabelSelector {
                                match_labels: Some(selector_labels(self.name)),
                                match_expressions: None,
                            }),
                            topology_key: "kubernetes.io/hostname".to_string(),
                            ..PodAffinityTerm::default()
                        },
                    },
                ]),
                required_during_scheduling_ignored_during_execution: None,
            }),
            ..Affinity::default()
        }
    }
}

/// The user's TLS Secret (key and certificate only) and the in-memory volume of `server.pem`.
fn tls_volumes(secret: &str) -> [Volume; 2] {
    [
        secret_volume(
            TLS_SECRET_VOLUME,
            secret.to_string(),
            &[TLS_KEY_KEY, TLS_CERT_KEY],
        ),
        Volume {
            name: TLS_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_string()),
                size_limit: Some(Quantity("1Mi".to_string())),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        },
    ]
}

/// An anonymous probe of the health endpoint `path` on the port named `port`.
fn probe(
    port: &str,
    path: &str,
    scheme: &str,
    period_seconds: i32,
    failure_threshold: i32,
) -> Probe {
    http_probe(port, scheme, path, period_seconds, 5, failure_threshold)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{DEFAULT_FS_GROUP, Objects, TlsCertificate, default_resources};
    use super::*;
    use crate::build::test_support::{assert_restricted, port};
    use k8s_openapi::api::core::v1::LocalObjectReference;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    /// The checks of the restricted Pod Security Standard, for every container.
    #[test]
    fn the_pods_pass_the_restricted_profile() {
        for objects in [default_objects(), full_objects(), bare_objects()] {
            let pod = pod_spec(&objects.stateful_set);
            assert_restricted(&pod);
            assert_eq!(pod.automount_service_account_token, Some(false));
            for volume in pod.volumes.iter().flatten() {
                assert!(
                    volume.config_map.is_some()
                        || volume.secret.is_some()
                        || volume.empty_dir.is_some(),
                    "volume {} is of a kind the profile does not allow",
                    volume.name
                );
                assert_eq!(volume.host_path, None);
            }
        }
        // fsGroup: the setting's, or none at all where the platform assigns one.
        let fs_group = |objects: &Objects| {
            pod_spec(&objects.stateful_set)
                .security_context
                .and_then(|c| c.fs_group)
        };
        assert_eq!(fs_group(&default_objects()), Some(DEFAULT_FS_GROUP));
        assert_eq!(fs_group(&full_objects()), None);
    }

    #[test]
    fn a_credential_store_is_written_by_an_init_container_and_only_the_store_reaches_the_server() {
        use super::super::credential_store::{
            INIT_CONTAINER_NAME, PASSWORD_ENV, SOURCE_DIR, STORE_DIR,
        };
        let mut cr = cluster("demo", "team-a");
        cr.spec.security.credential_store_secret_name = Some("db-credentials".into());
        let store = |digest: &str| CredentialStore {
            secret: "db-credentials".into(),
            aliases: vec!["dbpassword".into(), "ldap".into()],
            digest: digest.into(),
        };
        let mut with_store = referenced();
        with_store.credential_store = Some(store("one"));
        let objects = built(&cr, &settings(), &with_store);
        let pod = pod_spec(&objects.stateful_set);
        assert_restricted(&pod);
        let init = pod
            .init_containers
            .iter()
            .flatten()
            .find(|c| c.name == INIT_CONTAINER_NAME)
            .expect("the credential store init container");
        let script = &init.command.as_ref().expect("a command")[2];
        assert!(
            script.contains("!= \"2\""),
            "counts the two aliases: {script}"
        );
        let mounts = |c: &Container| -> Vec<(String, bool)> {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| (m.mount_path.clone(), m.read_only == Some(true)))
                .collect()
        };
        assert_eq!(
            mounts(init),
            [
                (SOURCE_DIR.to_string(), true),
                (STORE_DIR.to_string(), false)
            ]
        );
        let server = &pod.containers[0];
        assert!(mounts(server).contains(&(STORE_DIR.to_string(), true)));
        assert!(
            !mounts(server).iter().any(|(path, _)| path == SOURCE_DIR),
            "the user's Secret is not mounted in the server"
        );
        for container in [init, server] {
            let password = container
                .env
                .iter()
                .flatten()
                .find(|e| e.name == PASSWORD_ENV)
                .and_then(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
                .expect("the store's password from a Secret");
            assert_eq!(password.name, "demo-credential-store");
        }
        let source = pod
            .volumes
            .iter()
            .flatten()
            .find_map(|v| {
                v.secret
                    .as_ref()
                    .filter(|s| s.secret_name.as_deref() == Some("db-credentials"))
            })
            .expect("the user's Secret as a volume");
        let keys: Vec<&str> = source
            .items
            .iter()
            .flatten()
            .map(|i| i.key.as_str())
            .collect();
        assert_eq!(keys, ["dbpassword", "ldap"]);
        let store_volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == CREDENTIAL_STORE_VOLUME)
            .and_then(|v| v.empty_dir.as_ref())
            .expect("the store's emptyDir");
        assert_eq!(store_volume.medium.as_deref(), Some("Memory"));
        // The server configuration declares the store; a new content rolls the pods.
        let xml = &objects.config_map.data.as_ref().expect("data")["infinispan.xml"];
        assert!(xml.contains(&format!(
            r#"<credential-store name="credentials" path="{STORE_DIR}/credentials.pfx">"#
        )));
        assert!(xml.contains(&format!(r#"clear-text="${{env.{PASSWORD_ENV}}}""#)));
        let hash = |objects: &Objects| {
            objects
                .stateful_set
                .spec
                .template
                .metadata
                .as_ref()
                .expect("metadata")
                .annotations
                .as_ref()
                .expect("annotations")[CONFIG_HASH_ANNOTATION]
                .clone()
        };
        let mut changed = referenced();
        changed.credential_store = Some(store("two"));
        assert_ne!(hash(&objects), hash(&built(&cr, &settings(), &changed)));
        // Named but not given: an error, not a server without its store.
        assert!(matches!(
            crate::build::server::build(&cr, &settings(), &referenced()),
            Err(crate::build::server::BuildError::MissingCredentialStore { .. })
        ));
    }

    #[test]
    fn extra_libraries_are_fetched_by_an_init_container_of_the_operators_image_into_the_lib_directory()
     {
        use common_crds::infinispan::{Artifact, ArtifactType, DependenciesSpec};
        let digest = format!("sha256:{}", "ab".repeat(32));
        let mut cr = cluster("demo", "team-a");
        cr.spec.dependencies = Some(DependenciesSpec {
            artifacts: vec![
                Artifact {
                    url: "https://repo.example.com/libs/task.jar".into(),
                    hash: digest.clone(),
                    type_: None,
                },
                Artifact {
                    url: "https://repo.example.com/libs/driver.tgz".into(),
                    hash: digest.clone(),
                    type_: Some(ArtifactType::Tgz),
                },
            ],
            volume_claim_name: Some("jars".into()),
        });
        let mut settings = settings();
        settings.artifacts_image = "registry.example.com/cluster-operator:1.2".into();
        let objects = built(&cr, &settings, &referenced());
        let pod = pod_spec(&objects.stateful_set);
        assert_restricted(&pod);
        let init = pod
            .init_containers
            .iter()
            .flatten()
            .find(|c| c.name == ARTIFACTS_INIT_CONTAINER_NAME)
            .expect("the artifacts init container");
        assert_eq!(
            init.image.as_deref(),
            Some("registry.example.com/cluster-operator:1.2")
        );
        let args = init.args.clone().unwrap_or_default();
        assert_eq!(
            args[..3],
            ["artifacts", "fetch", "--into=/opt/infinispan/server/lib"]
        );
        let plan: Plan =
            serde_json::from_str(args[3].strip_prefix("--plan=").expect("the plan argument"))
                .expect("the plan");
        assert_eq!(plan.artifacts.len(), 2);
        assert_eq!(plan.artifacts[1].type_, ArtifactType::Tgz);
        assert!(init.env.is_none(), "no credentials in the init container");
        let writable = init.volume_mounts.clone().unwrap_or_default();
        assert_eq!(writable.len(), 1);
        assert_eq!(writable[0].read_only, None);

        let server = &pod.containers[0];
        let mounts = server.volume_mounts.clone().unwrap_or_default();
        let at = |path: &str| mounts.iter().find(|m| m.mount_path == path).cloned();
        assert_eq!(
            at("/opt/infinispan/server/lib").and_then(|m| m.read_only),
            Some(true)
        );
        assert_eq!(
            at("/opt/infinispan/server/lib/volume").map(|m| (m.name, m.read_only)),
            Some(("dependencies".to_string(), Some(true)))
        );
        let volumes = pod.volumes.clone().unwrap_or_default();
        let lib = volumes
            .iter()
            .find(|v| v.name == "server-lib")
            .and_then(|v| v.empty_dir.clone())
            .expect("the lib emptyDir");
        assert_eq!(lib.size_limit, Some(Quantity("1024Mi".into())));
        let claim = volumes
            .iter()
            .find(|v| v.name == "dependencies")
            .and_then(|v| v.persistent_volume_claim.clone())
            .expect("the claim");
        assert_eq!(claim.claim_name, "jars");
        assert_eq!(claim.read_only, Some(true));

        // Another digest, another claim or none at all: another config hash (the pods roll).
        let mut other = cr.clone();
        if let Some(d) = other.spec.dependencies.as_mut() {
            d.artifacts[0].hash = format!("sha256:{}", "cd".repeat(32));
        }
        let mut no_claim = cr.clone();
        if let Some(d) = no_claim.spec.dependencies.as_mut() {
            d.volume_claim_name = None;
        }
        let base = hash(&objects.stateful_set);
        for changed in [other, no_claim, cluster("demo", "team-a")] {
            assert_ne!(
                base,
                hash(&built(&changed, &settings, &referenced()).stateful_set)
            );
        }
        // Without libraries nothing of it.
        let plain = pod_spec(&default_objects().stateful_set);
        assert!(
            !plain
                .init_containers
                .iter()
                .flatten()
                .any(|c| c.name == ARTIFACTS_INIT_CONTAINER_NAME)
        );
    }

    #[test]
    fn probes_are_the_anonymous_health_endpoints() {
        for (objects, scheme) in [(default_objects(), "HTTP"), (full_objects(), "HTTPS")] {
            let container = container(&objects.stateful_set);
            let port = port(&container, SERVER_PORT_NAME);
            assert_eq!(port.container_port, 11222);
            for (probe, path) in [
                (container.startup_probe, "/health/live"),
                (container.liveness_probe, "/health/live"),
                (container.readiness_probe, "/health/ready"),
            ] {
                let probe = probe.unwrap_or_else(|| panic!("no {path} probe"));
                let get = probe.http_get.unwrap_or_else(|| panic!("{path}: no GET"));
                assert_eq!(get.path.as_deref(), Some(path));
                assert_eq!(get.port, IntOrString::String(SERVER_PORT_NAME.to_string()));
                assert_eq!(get.scheme.as_deref(), Some(scheme));
                // Anonymous: no credentials in the probe.
                assert_eq!(get.http_headers, None);
                assert!(probe.failure_threshold.unwrap_or(0) >= 3);
            }
        }
        // The client Service reaches the same port.
        let service = default_objects().client_service.spec.unwrap_or_default();
        let ports = service.ports.unwrap_or_default();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].port, 11222);
        assert_eq!(
            ports[0].target_port,
            Some(IntOrString::String(SERVER_PORT_NAME.to_string()))
        );
    }

    /// Each timing field the CR sets replaces the operator's; the others and the handler stay.
    #[test]
    fn probe_timings_and_the_grace_period_tune_the_server_container() {
        let tuned = built(&tuned_cluster(), &settings(), &referenced()).stateful_set;
        let default = default_objects().stateful_set;
        let timing = |probe: Option<Probe>| {
            let probe = probe.unwrap_or_else(|| panic!("no probe"));
            (
                probe.failure_threshold,
                probe.initial_delay_seconds,
                probe.period_seconds,
                probe.success_threshold,
                probe.timeout_seconds,
            )
        };
        let (container, before) = (container(&tuned), container(&default));
        assert_eq!(
            timing(before.liveness_probe.clone()),
            (Some(6), None, Some(10), None, Some(5))
        );
        assert_eq!(
            timing(container.liveness_probe.clone()),
            (Some(10), None, Some(10), None, Some(8))
        );
        assert_eq!(
            timing(container.readiness_probe.clone()),
            (Some(3), Some(4), Some(3), Some(2), Some(5))
        );
        assert_eq!(
            timing(container.startup_probe.clone()),
            (Some(120), None, Some(5), None, Some(5))
        );
        for (probe, was) in [
            (&container.liveness_probe, &before.liveness_probe),
            (&container.readiness_probe, &before.readiness_probe),
            (&container.startup_probe, &before.startup_probe),
        ] {
            let handler = |p: &Option<Probe>| p.clone().and_then(|p| p.http_get);
            assert_eq!(handler(probe), handler(was));
        }
        assert_eq!(pod_spec(&tuned).termination_grace_period_seconds, Some(120));
        // Absent: the Kubernetes default, not written.
        assert_eq!(pod_spec(&default).termination_grace_period_seconds, None);
        // An empty timing changes nothing.
        let mut cr = cluster("demo", "team-a");
        cr.spec.service.container.readiness_probe = Some(Default::default());
        let set = built(&cr, &settings(), &referenced()).stateful_set;
        assert_eq!(set, default);
    }

    #[test]
    fn a_pkcs12_keystore_is_mounted_as_it_is_with_its_password_from_the_secret() {
        // A DER SEQUENCE is all the check asks of the file; the server reads it.
        let p12 = "0\u{82}\u{1}\u{2}";
        let certificate = TlsCertificate::from_secret(&secret(
            "demo-p12",
            &[
                (KEYSTORE_P12_KEY, p12),
                (KEYSTORE_PASSWORD_KEY, "s3cret"),
                ("alias", "server"),
            ],
        ))
        .expect("a PKCS#12 Secret");
        let mut referenced = full_referenced();
        referenced.tls = Some(certificate);
        let objects = built(&full_cluster(), &full_settings(), &referenced);
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        assert!(
            xml.contains(r#"<keystore path="/etc/infinispan/tls/keystore.p12" password="${env.INFINISPAN_KEYSTORE_PASSWORD}" alias="server"/>"#),
            "{xml}"
        );
        assert!(
            !xml.contains("s3cret"),
            "the password is in the ConfigMap:\n{xml}"
        );
        let pod = pod_spec(&objects.stateful_set);
        assert!(pod.init_containers.unwrap_or_default().is_empty());
        let volume = pod
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == TLS_VOLUME)
            .and_then(|v| v.secret)
            .expect("the keystore's Secret volume");
        // The CR's certSecretName (the fixture's), holding the keystore here.
        assert_eq!(volume.secret_name.as_deref(), Some("demo-tls"));
        assert_eq!(
            volume.items.unwrap_or_default()[0].key,
            KEYSTORE_P12_KEY.to_string()
        );
        let env = container(&objects.stateful_set).env.unwrap_or_default();
        let password = env
            .iter()
            .find(|e| e.name == KEYSTORE_PASSWORD_ENV)
            .and_then(|e| e.value_from.clone())
            .and_then(|v| v.secret_key_ref)
            .expect("the password variable");
        assert_eq!(
            (password.name.as_str(), password.key.as_str()),
            ("demo-tls", KEYSTORE_PASSWORD_KEY)
        );
        // Not a PKCS#12 file, or no password: refused with the reason.
        for data in [
            vec![(KEYSTORE_P12_KEY, "PEM?"), (KEYSTORE_PASSWORD_KEY, "x")],
            vec![(KEYSTORE_P12_KEY, p12)],
        ] {
            assert!(TlsCertificate::from_secret(&secret("bad", &data)).is_err());
        }
    }

    #[test]
    fn tls_mounts_the_user_secret_and_builds_the_pem_keystore_in_memory() {
        let objects = full_objects();
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        assert!(
            xml.contains(r#"<keystore path="/etc/infinispan/tls/server.pem" password=""/>"#),
            "{xml}"
        );
        let pod = pod_spec(&objects.stateful_set);
        let volumes = pod.volumes.clone().unwrap_or_default();
        let user_secret = volumes
            .iter()
            .find(|v| v.name == TLS_SECRET_VOLUME)
            .and_then(|v| v.secret.clone())
            .unwrap_or_else(|| panic!("no TLS Secret volume"));
        assert_eq!(user_secret.secret_name.as_deref(), Some("demo-tls"));
        let memory = volumes
            .iter()
            .find(|v| v.name == TLS_VOLUME)
            .and_then(|v| v.empty_dir.clone())
            .unwrap_or_else(|| panic!("no keystore volume"));
        assert_eq!(memory.medium.as_deref(), Some("Memory"));

        let init = pod.init_containers.clone().unwrap_or_default();
        assert_eq!(init.len(), 1);
        assert_eq!(init[0].name, TLS_INIT_CONTAINER_NAME);
        assert_eq!(init[0].image, container(&objects.stateful_set).image);
        let script = init[0].command.clone().unwrap_or_default().join(" ");
        assert!(
            script.contains(
                "{ cat /etc/infinispan/tls-secret/tls.key; echo; cat /etc/infinispan/tls-secret/tls.crt; } > /etc/infinispan/tls/server.pem"
            ),
            "{script}"
        );
        // The server container sees the keystore (read-only), never the user's Secret.
        let mounts = container(&objects.stateful_set)
            .volume_mounts
            .unwrap_or_default();
        assert!(
            mounts
                .iter()
                .any(|m| m.name == TLS_VOLUME && m.read_only == Some(true))
        );
        assert!(!mounts.iter().any(|m| m.name == TLS_SECRET_VOLUME));

        // Without TLS: none of it.
        let pod = pod_spec(&default_objects().stateful_set);
        assert_eq!(pod.init_containers, None);
        assert!(
            !pod.volumes
                .unwrap_or_default()
                .iter()
                .any(|v| v.name == TLS_VOLUME || v.name == TLS_SECRET_VOLUME)
        );
    }

    #[test]
    fn resources_storage_and_scheduling_reach_the_pods() {
        let set = full_objects().stateful_set;
        let container = container(&set);
        assert_eq!(
            container.resources,
            full_cluster().spec.container.and_then(|c| c.resources)
        );
        let claims = set.spec.volume_claim_templates.clone().unwrap_or_default();
        assert_eq!(claims.len(), 1);
        let claim = claims[0].spec.clone().unwrap_or_default();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast-ssd"));
        assert_eq!(
            claim
                .resources
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").cloned()),
            Some(Quantity("20Gi".to_string()))
        );
        assert!(
            container
                .volume_mounts
                .unwrap_or_default()
                .iter()
                .any(|m| m.name == DATA_VOLUME && m.mount_path == DATA_DIR)
        );
        let retention = set
            .spec
            .persistent_volume_claim_retention_policy
            .clone()
            .unwrap_or_default();
        assert_eq!(retention.when_scaled.as_deref(), Some("Retain"));
        assert_eq!(retention.when_deleted.as_deref(), Some("Delete"));
        assert_eq!(set.spec.replicas, Some(3));

        let pod = pod_spec(&set);
        let scheduling = full_cluster().spec.scheduling.unwrap_or_default();
        assert_eq!(pod.tolerations, Some(scheduling.tolerations));
        assert_eq!(pod.node_selector, Some(scheduling.node_selector));
        assert_eq!(pod.priority_class_name, scheduling.priority_class_name);
        assert_eq!(
            pod.topology_spread_constraints,
            Some(scheduling.topology_spread_constraints)
        );
        assert_eq!(
            pod.image_pull_secrets,
            Some(vec![LocalObjectReference {
                name: "registry-example".to_string()
            }])
        );
        // No affinity in the CR: spread over nodes, preferably.
        let anti = pod
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
            .unwrap_or_default();
        assert_eq!(anti.len(), 1);
        assert_eq!(
            anti[0].pod_affinity_term.topology_key,
            "kubernetes.io/hostname"
        );
        // An affinity in the CR replaces it.
        let mut cr = full_cluster();
        let affinity = Affinity::default();
        if let Some(scheduling) = cr.spec.scheduling.as_mut() {
            scheduling.affinity = Some(affinity.clone());
        }
        let set = built(&cr, &full_settings(), &full_referenced()).stateful_set;
        assert_eq!(pod_spec(&set).affinity, Some(affinity));

        // Defaults: the settings' resources, 1Gi of persistent storage.
        let set = default_objects().stateful_set;
        assert_eq!(
            pod_spec(&set).containers[0].resources,
            Some(default_resources())
        );
        let claim = set.spec.volume_claim_templates.unwrap_or_default()[0]
            .spec
            .clone()
            .unwrap_or_default();
        assert_eq!(
            claim.resources.and_then(|r| r.requests),
            Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity("1Gi".to_string())
            )]))
        );

        // Ephemeral: an emptyDir of that size, no claim.
        let set = bare_objects().stateful_set;
        assert_eq!(set.spec.volume_claim_templates, None);
        let data = pod_spec(&set)
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == DATA_VOLUME)
            .and_then(|v| v.empty_dir)
            .unwrap_or_else(|| panic!("no emptyDir"));
        assert_eq!(data.size_limit, Some(Quantity("1Gi".to_string())));
    }

    #[test]
    fn the_environment_runs_the_server_managed_and_takes_the_crs_variables_last() {
        let variables = env(&full_objects().stateful_set);
        let names: Vec<&str> = variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "POD_IP",
                "POD_NAME",
                "MANAGED_ENV",
                "RUN_IN_CONTAINER",
                "INFINISPAN_TRANSPORT_TLS_PASSWORD",
                "JAVA_OPTIONS",
                "SERVER_LIBS"
            ]
        );
        let value = |name: &str| {
            variables
                .iter()
                .find(|v| v.name == name)
                .and_then(|v| v.value.clone())
        };
        assert_eq!(value("MANAGED_ENV").as_deref(), Some("TRUE"));
        // The CR's variable replaced the operator's in place.
        assert_eq!(value("RUN_IN_CONTAINER").as_deref(), Some("false"));
        assert_eq!(
            value("JAVA_OPTIONS").as_deref(),
            Some("-XX:+UseZGC -Dinfinispan.example=1")
        );
        let default_env = env(&default_objects().stateful_set);
        assert!(!default_env.iter().any(|v| v.name == "JAVA_OPTIONS"));
        assert_eq!(container(&default_objects().stateful_set).command, None);
    }
}
