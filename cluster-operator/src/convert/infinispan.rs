//! `Infinispan` v1 of infinispan-operator to this project's `Infinispan` v1
//! (docs/migration.md, "Infinispan", field by field).

use std::collections::BTreeMap;

use common_crds::infinispan::{
    Artifact, ArtifactType, Authorization, AuthorizationRole, ClientCertType, ContainerSpec,
    DependenciesSpec, EncryptionType, EndpointEncryption, ExposeSpec, ExposeType, LogLevel,
    LoggingSpec, MonitoringSpec, Permission, ProbeSpec, ResourcesOperatorSpec, SchedulingSpec,
    SecuritySpec, ServiceContainerSpec, ServiceSpec, UpgradeType,
};
use common_crds::labels::{
    POD_TARGET_ANNOTATIONS_ANNOTATION, POD_TARGET_LABELS_ANNOTATION, TARGET_ANNOTATIONS_ANNOTATION,
    TARGET_LABELS_ANNOTATION, is_reserved_annotation, is_reserved_label, target_keys,
};
use common_crds::{Infinispan, InfinispanSpec};
use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::fields::{FieldError, Fields, show};
use super::metadata;
use super::report::{Log, Outcome};
use crate::cli::DEFAULT_SERVER_VERSION;

/// Oldest server version this operator runs.
const MIN_VERSION: (u32, u32) = crate::build::server::MIN_VERSION;

/// infinispan-operator's switch of its ServiceMonitor (absent or `true`: one is created).
const MONITORING_ANNOTATION: &str = "infinispan.org/monitoring";

/// Annotations the other operator reads on the CR; they mean nothing here.
const IGNORED_ANNOTATIONS: [(&str, &str); 1] = [(
    "infinispan.org/routerAnnotations",
    "not supported: the gossip router's pod takes no annotations from the CR",
)];

/// Annotations the other operator reads on the CR that this one reads the same way
/// ([`crate::build::user_metadata`]): kept, with what each copies where.
const TARGET_ANNOTATIONS: [(&str, &str); 4] = [
    (
        TARGET_LABELS_ANNOTATION,
        "kept: the CR labels it names are copied to the cluster's Services and its exposing Service or Ingress (the fields: spec.service.serviceLabels, spec.expose.labels)",
    ),
    (
        POD_TARGET_LABELS_ANNOTATION,
        "kept: the CR labels it names are copied to the server pods, whose template they are part of (the field: spec.service.podLabels)",
    ),
    (
        TARGET_ANNOTATIONS_ANNOTATION,
        "kept: the CR annotations it names are copied to the cluster's Services and its exposing Service or Ingress, where they must start with an allowed prefix (--allowed-expose-annotation-prefix; the fields: spec.service.serviceAnnotations, spec.expose.annotations)",
    ),
    (
        POD_TARGET_ANNOTATIONS_ANNOTATION,
        "kept: the CR annotations it names are copied to the server pods, whose template they are part of (the field: spec.service.podAnnotations)",
    ),
];

/// Converts the object of `root`.
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<Infinispan, FieldError> {
    metadata::take_type(root);
    let mut metadata = metadata::convert(root, log, &IGNORED_ANNOTATIONS)?;
    let mut service_monitor = true;
    if let Some(annotations) = metadata.annotations.as_mut() {
        target_annotations(annotations, log);
        service_monitor = monitoring_annotation(annotations, log);
    }
    metadata.annotations = metadata.annotations.filter(|a| !a.is_empty());
    let name = metadata.name.clone().unwrap_or_default();
    let mut spec = InfinispanSpec {
        replicas: 1,
        version: None,
        image: None,
        container: None,
        service: ServiceSpec::default(),
        security: SecuritySpec::default(),
        expose: None,
        logging: None,
        scheduling: None,
        config_map_name: None,
        resources_operator: ResourcesOperatorSpec::default(),
        network_policy: Default::default(),
        monitoring: MonitoringSpec {
            service_monitor,
            ..MonitoringSpec::default()
        },
        accept_restores_from: Vec::new(),
        upgrades: Default::default(),
        dependencies: None,
    };
    if let Some(mut fields) = root.take_object("spec")? {
        convert_spec(&mut fields, &name, &mut spec, log)?;
        log.unknown(fields);
    }
    metadata::omit_status(root, log);
    check_name(&name, log);
    let mut cr = Infinispan::new(&name, spec);
    cr.metadata = metadata;
    Ok(cr)
}

/// Reports the target annotations ([`TARGET_ANNOTATIONS`]) kept in `annotations`, each without
/// the operator's own keys, which this operator refuses to copy.
fn target_annotations(annotations: &mut BTreeMap<String, String>, log: &mut Log) {
    for (annotation, note) in TARGET_ANNOTATIONS {
        let Some(list) = annotations.get(annotation) else {
            continue;
        };
        let path = format!("metadata.annotations.{annotation}");
        let reserved: fn(&str) -> bool = if annotation.ends_with("Labels") {
            is_reserved_label
        } else {
            is_reserved_annotation
        };
        let (kept, refused): (Vec<&str>, Vec<&str>) =
            target_keys(list).partition(|key| !reserved(key));
        if refused.is_empty() {
            log.mapped(&path, note);
            continue;
        }
        let reason = format!(
            "{} named the operator's own keys, which are never copied here (the cluster would be Degraded, InvalidMetadata)",
            refused.join(", ")
        );
        if kept.is_empty() {
            let value = annotations.remove(annotation).unwrap_or_default();
            log.dropped(&path, &json!(value), &reason);
        } else {
            let kept = kept.join(", ");
            log.changed(&path, &path, &format!("{kept}: {reason}; {note}"));
            annotations.insert(annotation.to_string(), kept);
        }
    }
}

/// Takes infinispan-operator's [`MONITORING_ANNOTATION`] out of `annotations`: whether the
/// cluster keeps a ServiceMonitor (`false` opts out, as there; `true` is the default here too).
fn monitoring_annotation(annotations: &mut BTreeMap<String, String>, log: &mut Log) -> bool {
    let path = format!("metadata.annotations.{MONITORING_ANNOTATION}");
    match annotations.remove(MONITORING_ANNOTATION).as_deref() {
        None => true,
        Some("false") => {
            log.changed(
                &path,
                "spec.monitoring.serviceMonitor",
                "false: no ServiceMonitor is kept for the cluster",
            );
            false
        }
        Some("true") => {
            log.removed(
                &path,
                "the default here: a ServiceMonitor is kept when its CRD is installed (spec.monitoring.serviceMonitor)",
            );
            true
        }
        Some(other) => {
            log.dropped(
                &path,
                &json!(other),
                "neither true nor false: the default is kept (spec.monitoring.serviceMonitor: true)",
            );
            true
        }
    }
}

fn convert_spec(
    fields: &mut Fields,
    name: &str,
    spec: &mut InfinispanSpec,
    log: &mut Log,
) -> Result<(), FieldError> {
    if let Some(replicas) = fields.take_as::<i32>("replicas")? {
        spec.replicas = replicas;
        log.mapped("spec.replicas", "");
    }
    let image = log.take_text(fields, "image")?;
    version(fields.take_as("version")?, image.is_some(), spec, log);
    if let Some(image) = image {
        log.mapped(
            "spec.image",
            "spec.version must say what the image runs (16.0 or later); the operator must allow its prefix (--allowed-image-prefix)",
        );
        spec.image = Some(image);
    }
    if let Some(mut container) = fields.take_object("container")? {
        spec.container = container_spec(&mut container, log)?;
        log.unknown(container);
    }
    if let Some(mut service) = fields.take_object("service")? {
        spec.service = service_spec(&mut service, name, log)?;
        log.unknown(service);
    }
    if let Some(mut security) = fields.take_object("security")? {
        spec.security = security_spec(&mut security, name, log)?;
        log.unknown(security);
    }
    if let Some(mut expose) = fields.take_object("expose")? {
        spec.expose = expose_spec(&mut expose, log)?;
        log.unknown(expose);
    }
    if let Some(mut logging) = fields.take_object("logging")? {
        let categories: Option<BTreeMap<String, LogLevel>> = logging.take_as("categories")?;
        let mut converted = LoggingSpec::default();
        if let Some(categories) = categories.filter(|c| !c.is_empty()) {
            log.mapped("spec.logging.categories", "applied without a restart");
            converted.categories = categories;
        }
        match logging.take_as::<String>("pattern")? {
            Some(pattern) if pattern.contains('$') => log.dropped(
                "spec.logging.pattern",
                &json!(pattern),
                "a Log4j lookup ($) is refused here: it could write the server's environment, passwords included, into the logs; write the pattern without it",
            ),
            Some(pattern) if !pattern.is_empty() => {
                log.mapped("spec.logging.pattern", "applied without a restart");
                converted.pattern = Some(pattern);
            }
            _ => {}
        }
        if converted != LoggingSpec::default() {
            spec.logging = Some(converted);
        }
        log.unknown(logging);
    }
    if let Some(autoscale) = fields.take("autoscale") {
        if autoscale.get("disabled") == Some(&Value::Bool(true)) {
            log.removed(
                "spec.autoscale",
                "disabled there; there is no autoscaling here",
            );
        } else {
            log.dropped(
                "spec.autoscale",
                &autoscale,
                "not supported: memory-based autoscaling of the other operator (its Cache service type) has no equivalent; the CR has the scale subresource, so a HorizontalPodAutoscaler (scaleTargetRef kind Infinispan) or kubectl scale infinispan <name> --replicas=N scales it",
            );
        }
    }
    spec.scheduling = scheduling(fields, name, log)?;
    log.drop_field(
        fields,
        "cloudEvents",
        "not supported: the server removed its Cloud Events integration in 15.0, so the setting had no effect on any server this operator runs (16.0 and later)",
    );
    if let Some(mut dependencies) = fields.take_object("dependencies")? {
        spec.dependencies = dependencies_spec(&mut dependencies, log)?;
        log.unknown(dependencies);
    }
    if let Some(config_map) = log.take_text(fields, "configMapName")? {
        log.mapped(
            "spec.configMapName",
            &format!(
                "exactly one key of infinispan-config.xml, .yaml, .yml or .json, layered over the operator's configuration; {}",
                allow_note("configmap", &config_map, name)
            ),
        );
        spec.config_map_name = Some(config_map);
    }
    if let Some(mut upgrades) = fields.take_object("upgrades")? {
        spec.upgrades.type_ = upgrade_type(&mut upgrades, log)?;
        log.unknown(upgrades);
    }
    if let Some(mut listener) = fields.take_object("configListener")? {
        config_listener(&mut listener, &mut spec.resources_operator, log)?;
        log.unknown(listener);
    }
    if let Some(jmx) = fields.take("jmx") {
        if jmx.get("enabled") == Some(&Value::Bool(true)) {
            log.dropped(
                "spec.jmx",
                &jmx,
                "not supported: the servers' statistics are on /metrics (spec.monitoring); a JMX remote port would be a second endpoint outside the realm and TLS; open one yourself with -Dcom.sun.management.jmxremote.* in spec.container.extraJvmOpts and reach it with kubectl port-forward",
            );
        } else {
            log.omitted("spec.jmx", "JMX off, as here");
        }
    }
    log.drop_field(
        fields,
        "serviceAccountName",
        "not supported (the server pods run without a service account token)",
    );
    Ok(())
}

/// `spec.version`: kept when 16.0 or later, else the operator's default.
fn version(version: Option<String>, has_image: bool, spec: &mut InfinispanSpec, log: &mut Log) {
    let Some(version) = version.filter(|v| !v.is_empty()) else {
        log.note(format!(
            "spec.version is not set: the cluster is created with the operator's default version ({DEFAULT_SERVER_VERSION}) and keeps it until spec.version names another"
        ));
        return;
    };
    if major_minor(&version).is_some_and(|v| v >= MIN_VERSION) {
        log.mapped(
            "spec.version",
            "the operator must have an image for it (built in: 16.0.7; more with --server-image)",
        );
        spec.version = Some(version);
        return;
    }
    let image_note = if has_image {
        "; spec.image must then run it too"
    } else {
        ""
    };
    log.changed(
        "spec.version",
        "spec.version",
        &format!(
            "{version} is older than {}.{}, the oldest version this operator runs: set to {DEFAULT_SERVER_VERSION}; the move is a server upgrade (docs/migration.md, \"Read this first\"){image_note}",
            MIN_VERSION.0, MIN_VERSION.1
        ),
    );
    spec.version = Some(DEFAULT_SERVER_VERSION.to_string());
}

/// `major.minor` of `16.0.7`, `16.0`...
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A name this operator cannot use: a note, or the object not written when the API server
/// would refuse it.
fn check_name(name: &str, log: &mut Log) {
    let max = crate::build::server::MAX_CLUSTER_NAME_LEN;
    if name.len() > max || !common_crds::naming::is_dns1123_label(name) {
        log.note(format!(
            "the name {name:?} is not a DNS-1123 label of at most {max} characters: this operator refuses it (Degraded); rename the cluster and what refers to it"
        ));
    }
    if ["-ping", "-operator", "-external"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
    {
        log.object = Some((
            Outcome::Dropped,
            format!(
                "not written: the API server refuses the name {name:?}, which ends with -ping, -operator or -external (another cluster's Services have such names); rename the cluster and what refers to it"
            ),
        ));
    }
}

fn container_spec(fields: &mut Fields, log: &mut Log) -> Result<Option<ContainerSpec>, FieldError> {
    let mut container = ContainerSpec {
        resources: requirements(fields, "spec.container.resources", log)?,
        ..ContainerSpec::default()
    };
    if let Some(opts) = log.take_text(fields, "extraJvmOpts")? {
        log.mapped(
            "spec.container.extraJvmOpts",
            "appended to the operator's options, as JAVA_OPTIONS",
        );
        container.extra_jvm_opts = Some(opts);
    }
    if let Some(env) = fields.take_as::<Vec<EnvVar>>("env")? {
        if !env.is_empty() {
            log.mapped(
                "spec.container.env",
                "replaces an operator variable of the same name; valueFrom needs --allow-env-value-from",
            );
        }
        container.env = env;
    }
    log.drop_field(fields, "cliExtraJvmOpts", "not supported (no CLI pods)");
    log.drop_field(
        fields,
        "routerExtraJvmOpts",
        "not supported: the gossip router's JVM options are the operator's (its heap is half of the router pod's 256Mi)",
    );
    Ok(Some(container).filter(|c| *c != ContainerSpec::default()))
}

/// `cpu` and `memory` of `fields` (`"<limit>:<request>"` or `"<limit>"`) as requirements.
pub(super) fn requirements(
    fields: &mut Fields,
    to: &str,
    log: &mut Log,
) -> Result<Option<ResourceRequirements>, FieldError> {
    let mut limits = BTreeMap::new();
    let mut requests = BTreeMap::new();
    for resource in ["cpu", "memory"] {
        let path = fields.path(resource);
        let Some(text) = log.take_text(fields, resource)? else {
            continue;
        };
        let (limit, request) = limit_and_request(&text).ok_or_else(|| {
            FieldError::new(
                &path,
                format!("{text:?} is not \"<limit>:<request>\" or \"<limit>\""),
            )
        })?;
        log.changed(
            &path,
            &format!("{to}.{{limits,requests}}.{resource}"),
            &format!("{text:?}: limit {limit}, request {request}"),
        );
        limits.insert(resource.to_string(), Quantity(limit));
        requests.insert(resource.to_string(), Quantity(request));
    }
    if limits.is_empty() {
        return Ok(None);
    }
    Ok(Some(ResourceRequirements {
        limits: Some(limits),
        requests: Some(requests),
        ..ResourceRequirements::default()
    }))
}

/// `"2Gi:1Gi"` -> (2Gi, 1Gi); `"2Gi"` -> (2Gi, 2Gi) (the limit is the request too, as
/// infinispan-operator did).
fn limit_and_request(text: &str) -> Option<(String, String)> {
    let mut parts = text.split(':').map(str::trim);
    let limit = parts.next().filter(|p| !p.is_empty())?;
    let request = match parts.next() {
        Some(request) if !request.is_empty() => request,
        Some(_) => return None,
        None => limit,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((limit.to_string(), request.to_string()))
}

fn service_spec(fields: &mut Fields, name: &str, log: &mut Log) -> Result<ServiceSpec, FieldError> {
    let mut service = ServiceSpec::default();
    match fields.take_as::<String>("type")?.as_deref() {
        None => {}
        Some("DataGrid") => log.removed(
            "spec.service.type",
            "DataGrid: every cluster is what DataGrid was",
        ),
        Some(other) => log.dropped(
            "spec.service.type",
            &json!(other),
            "not supported: the Cache service type (one fixed default cache, no persistence) has no equivalent; every cluster is what DataGrid was: declare the cache as a Cache CR, and set spec.service.container.ephemeralStorage: true for the same storage",
        ),
    }
    if let Some(mut container) = fields.take_object("container")? {
        service.container = service_container(&mut container, log)?;
        log.unknown(container);
    }
    if let Some(mut sites) = fields.take_object("sites")? {
        service.sites = Some(super::sites::sites_spec(&mut sites, name, log)?);
        log.unknown(sites);
    }
    log.drop_field(
        fields,
        "replicationFactor",
        "not supported: it set the owners of the Cache service type's default cache only; set owners in your cache configurations (a Cache CR's template)",
    );
    Ok(service)
}

fn service_container(
    fields: &mut Fields,
    log: &mut Log,
) -> Result<ServiceContainerSpec, FieldError> {
    let mut container = ServiceContainerSpec::default();
    if let Some(storage) = log.take_text(fields, "storage")? {
        log.mapped(
            "spec.service.container.storage",
            "cannot be changed on an existing cluster",
        );
        container.storage = Quantity(storage);
    }
    if let Some(class) = log.take_text(fields, "storageClassName")? {
        log.mapped("spec.service.container.storageClassName", "");
        container.storage_class_name = Some(class);
    }
    if let Some(ephemeral) = fields.take_as::<bool>("ephemeralStorage")? {
        log.mapped("spec.service.container.ephemeralStorage", "");
        container.ephemeral_storage = ephemeral;
    }
    let probes = [
        ("livenessProbe", true, &mut container.liveness_probe),
        ("readinessProbe", false, &mut container.readiness_probe),
        ("startupProbe", true, &mut container.startup_probe),
    ];
    for (key, single_success, probe) in probes {
        if let Some(mut timing) = fields.take_object(key)? {
            let path = format!("spec.service.container.{key}");
            *probe = probe_spec(&mut timing, &path, single_success, log)?;
            log.unknown(timing);
        }
    }
    if let Some(seconds) = fields.take_as::<i64>("terminationGracePeriodSeconds")? {
        let path = "spec.service.container.terminationGracePeriodSeconds";
        if seconds < 0 {
            log.dropped(path, &json!(seconds), "negative: refused here");
        } else {
            log.mapped(path, "part of the pod template: changing it rolls the pods");
            container.termination_grace_period_seconds = Some(seconds);
        }
    }
    Ok(container)
}

/// A probe's timing (the other operator's probe has only these five fields): `None` when it
/// sets none. 0 is the Kubernetes default of a field (omitted: the operator's applies here); a
/// value below a field's minimum, or a successThreshold other than 1 on a liveness or startup
/// probe (`single_success`), is dropped, as the API server would refuse it.
fn probe_spec(
    fields: &mut Fields,
    path: &str,
    single_success: bool,
    log: &mut Log,
) -> Result<Option<ProbeSpec>, FieldError> {
    let mut probe = ProbeSpec::default();
    let mut mapped = Vec::new();
    let mut seen = false;
    let timings = [
        ("failureThreshold", 1, &mut probe.failure_threshold),
        ("initialDelaySeconds", 0, &mut probe.initial_delay_seconds),
        ("periodSeconds", 1, &mut probe.period_seconds),
        ("successThreshold", 1, &mut probe.success_threshold),
        ("timeoutSeconds", 1, &mut probe.timeout_seconds),
    ];
    for (key, minimum, slot) in timings {
        let path = fields.path(key);
        let Some(value) = fields.take_as::<i32>(key)? else {
            continue;
        };
        seen = true;
        if value == 0 && minimum == 1 {
            log.omitted(
                &path,
                "0: the Kubernetes default; the operator's value applies here",
            );
        } else if value < minimum {
            log.dropped(
                &path,
                &json!(value),
                &format!("below {minimum}: refused here"),
            );
        } else if single_success && key == "successThreshold" && value != 1 {
            log.dropped(
                &path,
                &json!(value),
                "must be 1 on a liveness or startup probe (Kubernetes refuses another value)",
            );
        } else {
            *slot = Some(value);
            mapped.push(key);
        }
    }
    if mapped.is_empty() {
        if !seen && fields.is_empty() {
            log.omitted(path, "empty");
        }
        return Ok(None);
    }
    log.mapped(
        path,
        &format!(
            "{}: the timing only, the handler stays the operator's GET /health/*; changing it rolls the pods",
            mapped.join(", ")
        ),
    );
    Ok(Some(probe))
}

fn security_spec(
    fields: &mut Fields,
    name: &str,
    log: &mut Log,
) -> Result<SecuritySpec, FieldError> {
    let mut security = SecuritySpec::default();
    if let Some(on) = fields.take_as::<bool>("endpointAuthentication")? {
        log.mapped("spec.security.endpointAuthentication", "");
        security.endpoint_authentication = on;
    }
    if let Some(secret) = log.take_text(fields, "endpointSecretName")? {
        let generated = format!("{name}-generated-secret");
        let note = if secret == generated {
            format!(
                "{generated} is the Secret the other operator generated, owned by the old CR and deleted with it: copy it under a new name without ownerReferences and name that here, or remove the field to get a new generated Secret (docs/migration.md, \"Credentials\")"
            )
        } else {
            format!(
                "same identities.yaml format; the user name operator is taken by the operators; {}",
                allow_note("secret", &secret, name)
            )
        };
        log.mapped("spec.security.endpointSecretName", &note);
        security.endpoint_secret_name = Some(secret);
    }
    if let Some(mut encryption) = fields.take_object("endpointEncryption")? {
        security.endpoint_encryption = endpoint_encryption(&mut encryption, name, log)?;
        log.unknown(encryption);
    }
    if let Some(mut authorization) = fields.take_object("authorization")? {
        security.authorization =
            convert_authorization(&mut authorization, security.endpoint_authentication, log)?;
        log.unknown(authorization);
    }
    if let Some(secret) = log.take_text(fields, "credentialStoreSecretName")? {
        log.mapped(
            "spec.security.credentialStoreSecretName",
            &format!(
                "every key an alias of the store credentials, as the other operator made it; a value must be one line, not empty, without both ' and \"; {}",
                allow_note("secret", &secret, name)
            ),
        );
        security.credential_store_secret_name = Some(secret);
    }
    Ok(security)
}

/// `spec.security.authorization`: on whenever clients authenticate here; its custom roles
/// carried over (a permission the server does not know, or the operators' `admin` and
/// `monitor` redefined, dropped with the reason); `roleMapper` is the default mapper or needs
/// client certificates.
fn convert_authorization(
    fields: &mut Fields,
    authentication: bool,
    log: &mut Log,
) -> Result<Authorization, FieldError> {
    let mut authorization = Authorization::default();
    match fields.take_as::<bool>("enabled")? {
        Some(true) if authentication => log.removed(
            "spec.security.authorization.enabled",
            "with authentication on, authorization is always on here",
        ),
        Some(enabled) => log.dropped(
            "spec.security.authorization.enabled",
            &json!(enabled),
            "authorization follows endpointAuthentication here: on with it, off without",
        ),
        None => {}
    }
    if let Some(mapper) = log.take_text(fields, "roleMapper")? {
        if mapper == "cluster" {
            log.removed(
                "spec.security.authorization.roleMapper",
                "the cluster role mapper is the server's default here",
            );
        } else {
            log.dropped(
                "spec.security.authorization.roleMapper",
                &json!(mapper),
                "users get their roles from their identities (the cluster role mapper); with clientCert: Authenticate a certificate's common name is its role, as commonName did",
            );
        }
    }
    let roles: Option<Vec<Value>> = fields.take_as("roles")?;
    for (i, role) in roles.unwrap_or_default().into_iter().enumerate() {
        let path = format!("spec.security.authorization.roles[{i}]");
        let name = role["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() || name == "admin" || name == "monitor" {
            log.dropped(
                &path,
                &role,
                "admin and monitor are the operators' roles here and cannot be redefined (a role needs a name)",
            );
            continue;
        }
        let permissions: Result<Vec<Permission>, _> =
            serde_json::from_value(role["permissions"].clone());
        match permissions {
            Ok(permissions) if !permissions.is_empty() => {
                log.mapped(&path, "");
                authorization.roles.push(AuthorizationRole { name, permissions });
            }
            _ => log.dropped(
                &path,
                &role,
                "permissions must be Infinispan 16's names (READ, WRITE, EXEC, LISTEN, BULK_READ, BULK_WRITE, LIFECYCLE, ADMIN, CREATE, MONITOR, ALL, ALL_READ, ALL_WRITE, NONE)",
            ),
        }
    }
    Ok(authorization)
}

/// `spec.dependencies`: artifacts with a URL and a SHA-256 are carried over, the others
/// (Maven coordinates, another digest, none) are dropped with what to give instead; the claim
/// is carried over.
fn dependencies_spec(
    fields: &mut Fields,
    log: &mut Log,
) -> Result<Option<DependenciesSpec>, FieldError> {
    let mut dependencies = DependenciesSpec::default();
    let artifacts: Option<Vec<Value>> = fields.take_as("artifacts")?;
    for (i, artifact) in artifacts.unwrap_or_default().into_iter().enumerate() {
        let path = format!("spec.dependencies.artifacts[{i}]");
        let url = artifact["url"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string();
        let hash = artifact["hash"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string();
        let type_ = match artifact["type"].as_str().unwrap_or("file") {
            "file" | "" => ArtifactType::File,
            "zip" => ArtifactType::Zip,
            "tgz" => ArtifactType::Tgz,
            other => {
                return Err(FieldError::new(
                    format!("{path}.type"),
                    format!("{other:?} is not file, zip or tgz"),
                ));
            }
        };
        if url.is_empty() {
            log.dropped(
                &path,
                &artifact,
                "Maven coordinates are not resolved here: give the artifact's URL in your repository (url) and its SHA-256 (hash: sha256:<hex>)",
            );
            continue;
        }
        let candidate = Artifact {
            url: url.clone(),
            hash: hash.clone(),
            type_: Some(type_).filter(|t| *t != ArtifactType::File),
        };
        match crate::artifacts::Plan::of(std::slice::from_ref(&candidate)) {
            Ok(_) => {
                log.mapped(
                    &path,
                    "checked against its SHA-256 before the servers load it; the operator must allow the URL's prefix (--allowed-artifact-prefix, Helm crPolicy.allowedArtifactPrefixes)",
                );
                dependencies.artifacts.push(candidate);
            }
            Err(_) => log.dropped(
                &path,
                &artifact,
                &format!(
                    "hash must be sha256:<64 hex digits> here (found {:?}): a download is never loaded unchecked; add it (sha256sum of the file) and an http(s) URL",
                    hash
                ),
            ),
        }
    }
    if let Some(claim) = log.take_text(fields, "volumeClaimName")? {
        log.mapped(
            "spec.dependencies.volumeClaimName",
            "mounted read-only under the servers' lib directory; the operator must allow claims (--allow-artifact-volumes, Helm crPolicy.allowArtifactVolumes)",
        );
        dependencies.volume_claim_name = Some(claim);
    }
    log.drop_field(
        fields,
        "initContainer",
        "the init container's resources are fixed here (50m CPU, 64Mi-256Mi memory: it streams each download to disk)",
    );
    Ok((dependencies != DependenciesSpec::default()).then_some(dependencies))
}

/// `spec.upgrades.type`: `Shutdown` is the same here; `InPlaceRolling` is `Rolling`;
/// `HotRodRolling` (a second cluster and a Hot Rod migration, for versions the server cannot
/// mix) is `Shutdown`, which is safe across such versions too, with the cluster down meanwhile.
fn upgrade_type(fields: &mut Fields, log: &mut Log) -> Result<UpgradeType, FieldError> {
    let path = "spec.upgrades.type";
    Ok(match fields.take_as::<String>("type")?.as_deref() {
        None | Some("") => UpgradeType::default(),
        Some("Shutdown") => {
            log.mapped(
                path,
                "a graceful stop (the caches shut down cluster-wide), then every pod on the new image",
            );
            UpgradeType::Shutdown
        }
        Some("InPlaceRolling") => {
            log.changed(path, path, "InPlaceRolling -> Rolling: one pod at a time");
            UpgradeType::Rolling
        }
        Some("HotRodRolling") => {
            log.changed(
                path,
                path,
                "HotRodRolling -> Shutdown: no second cluster fed over Hot Rod here; the cluster stops gracefully (its caches persisted) and starts on the new version, safe across versions the server cannot mix, but unavailable meanwhile (docs/upgrade.md)",
            );
            UpgradeType::Shutdown
        }
        Some(other) => {
            log.dropped(
                path,
                &json!(other),
                "not a strategy of infinispan-operator's API: the default Rolling (one pod at a time) applies, or set Shutdown (docs/upgrade.md)",
            );
            UpgradeType::default()
        }
    })
}

/// What the user does so that the cluster `cluster` may use the object a converted field names
/// (the operator's CR policy, docs/security.md).
pub(super) fn allow_note(resource: &str, object: &str, cluster: &str) -> String {
    format!(
        "the cluster uses it only once it allows the cluster: kubectl annotate {resource} {object} {}={cluster}",
        common_crds::labels::ALLOW_CLUSTERS_ANNOTATION
    )
}

fn endpoint_encryption(
    fields: &mut Fields,
    name: &str,
    log: &mut Log,
) -> Result<EndpointEncryption, FieldError> {
    let mut encryption = EndpointEncryption::default();
    let cert_secret = log.take_text(fields, "certSecretName")?;
    let pem_note = "a Secret with tls.key (unencrypted PEM) and tls.crt (PEM chain), or keystore.p12 with password and alias as the other operator read it";
    let type_path = "spec.security.endpointEncryption.type";
    let secret_path = "spec.security.endpointEncryption.certSecretName";
    match fields.take_as::<String>("type")?.as_deref() {
        None | Some("") => {}
        Some("None") => {
            // Explicit: a CR without a type gets TLS by default here.
            log.mapped(type_path, "");
            encryption.type_ = Some(EncryptionType::None);
        }
        Some("Secret") => {
            log.mapped(type_path, "");
            encryption.type_ = Some(EncryptionType::Secret);
        }
        Some("secret") => {
            log.changed(
                type_path,
                type_path,
                "secret -> Secret (case-sensitive here)",
            );
            encryption.type_ = Some(EncryptionType::Secret);
        }
        Some(service @ ("Service" | "service")) => {
            let secret = cert_secret
                .clone()
                .unwrap_or_else(|| format!("{name}-cert-secret"));
            log.changed(
                type_path,
                type_path,
                &format!(
                    "{service} -> Secret: no platform-issued certificates here; issue a certificate for {name}.<namespace>.svc.<cluster domain> (e.g. with cert-manager) into the Secret {secret}; {}",
                    allow_note("secret", &secret, name)
                ),
            );
            encryption.type_ = Some(EncryptionType::Secret);
            if cert_secret.is_none() {
                log.changed(
                    secret_path,
                    secret_path,
                    &format!("not set: {secret}, the name the other operator used"),
                );
                encryption.cert_secret_name = Some(secret);
            }
        }
        Some(other) => {
            return Err(FieldError::new(
                type_path,
                format!("{other:?} is not None, Secret or Service"),
            ));
        }
    }
    if let Some(secret) = cert_secret {
        log.mapped(
            secret_path,
            &format!("{pem_note}; {}", allow_note("secret", &secret, name)),
        );
        encryption.cert_secret_name = Some(secret);
    }
    log.drop_field(
        fields,
        "certServiceName",
        "not supported (no platform-issued certificates): issue a certificate for <name>.<namespace>.svc.<cluster domain> (e.g. with cert-manager)",
    );
    let client_path = "spec.security.endpointEncryption.clientCert";
    let trust_path = "spec.security.endpointEncryption.clientCertSecretName";
    let client_cert = match fields.take_as::<String>("clientCert")?.as_deref() {
        None | Some("") => None,
        Some("None") => {
            log.removed(client_path, "None: no client certificates, as here");
            None
        }
        Some("Validate") => {
            log.mapped(
                client_path,
                "clients present a certificate signed by a CA of clientCertSecretName, and their credentials; the operators present one of the cluster's own CA",
            );
            Some(ClientCertType::Validate)
        }
        Some("Authenticate") => {
            log.mapped(
                client_path,
                "the certificates clientCertSecretName lists themselves are accepted, without a password (a certificate merely signed by a listed CA is refused); a client's role is its certificate's common name; the operators and the ServiceMonitor present certificates of their own, which the server lists too",
            );
            Some(ClientCertType::Authenticate)
        }
        Some(other) => {
            return Err(FieldError::new(
                client_path,
                format!("{other:?} is not None, Validate or Authenticate"),
            ));
        }
    };
    let asks_certificates = client_cert.is_some();
    encryption.client_cert = client_cert;
    match fields.take_as::<String>("clientCertSecretName")? {
        Some(secret) if asks_certificates && !secret.is_empty() => {
            log.mapped(
                trust_path,
                &format!(
                    "the same keys (trust.ca and trust.cert.<name> as PEM, or truststore.p12 and truststore-password); {}",
                    allow_note("secret", &secret, name)
                ),
            );
            encryption.client_cert_secret_name = Some(secret);
        }
        Some(secret) if !secret.is_empty() => {
            log.removed(
                trust_path,
                "unused without clientCert Validate or Authenticate",
            );
        }
        _ if asks_certificates => {
            return Err(FieldError::new(
                trust_path,
                "is required when clientCert is Validate or Authenticate".to_string(),
            ));
        }
        _ => {}
    }
    Ok(encryption)
}

fn expose_spec(fields: &mut Fields, log: &mut Log) -> Result<Option<ExposeSpec>, FieldError> {
    let path = "spec.expose.type";
    let type_ = match fields.take_as::<String>("type")?.as_deref() {
        Some("NodePort") => {
            log.mapped(path, "a Service <name>-external");
            ExposeType::NodePort
        }
        Some("LoadBalancer") => {
            log.mapped(path, "a Service <name>-external");
            ExposeType::LoadBalancer
        }
        Some("Route") => {
            log.mapped(
                path,
                "a Route <name> (TLS passthrough when the endpoint has TLS) where the API server serves Routes; an Ingress (REST only) elsewhere",
            );
            ExposeType::Route
        }
        Some(other) => {
            return Err(FieldError::new(
                path,
                format!("{other:?} is not NodePort, LoadBalancer or Route"),
            ));
        }
        None => return Err(FieldError::new(path, "missing")),
    };
    let mut expose = ExposeSpec {
        type_,
        node_port: None,
        port: None,
        host: None,
        annotations: BTreeMap::new(),
        labels: BTreeMap::new(),
    };
    if let Some(port) = fields.take_as::<i32>("nodePort")? {
        let path = "spec.expose.nodePort";
        if port == 0 {
            log.omitted(path, "empty");
        } else if type_ != ExposeType::NodePort {
            log.dropped(path, &json!(port), "only with type NodePort here");
        } else if !(30000..=32767).contains(&port) {
            log.dropped(
                path,
                &json!(port),
                "outside 30000-32767, refused here: a node port is allocated",
            );
        } else {
            log.mapped(path, "");
            expose.node_port = Some(port);
        }
    }
    if let Some(host) = log.take_text(fields, "host")? {
        let path = "spec.expose.host";
        if type_ == ExposeType::Route {
            log.mapped(path, "the Route's host");
            expose.host = Some(host);
        } else {
            log.dropped(path, &json!(host), "only with Route");
        }
    }
    if let Some(port) = fields.take_as::<i32>("port")? {
        if type_ != ExposeType::LoadBalancer || port == 11222 {
            // The other operator used it only for LoadBalancer; 11222 is the default.
            log.removed(
                "spec.expose.port",
                "used only by a LoadBalancer, whose port is 11222 by default",
            );
        } else {
            log.mapped("spec.expose.port", "the load balancer's port");
            expose.port = Some(port);
        }
    }
    if let Some(annotations) = fields.take_as::<BTreeMap<String, String>>("annotations")? {
        if !annotations.is_empty() {
            log.mapped(
                "spec.expose.annotations",
                "on the Service, the Ingress or the Route; each must start with an allowed prefix (--allowed-expose-annotation-prefix)",
            );
        }
        expose.annotations = annotations;
    }
    Ok(Some(expose))
}

fn scheduling(
    fields: &mut Fields,
    name: &str,
    log: &mut Log,
) -> Result<Option<SchedulingSpec>, FieldError> {
    let mut scheduling = SchedulingSpec::default();
    let deprecated: Option<Affinity> = fields.take_as("affinity")?;
    if let Some(mut fields) = fields.take_object("scheduling")? {
        if let Some(affinity) = fields.take_as::<Affinity>("affinity")? {
            scheduling.affinity = affinity_of(affinity, name, "spec.scheduling.affinity", log);
        }
        if let Some(tolerations) = fields.take_as::<Vec<Toleration>>("tolerations")? {
            if !tolerations.is_empty() {
                log.mapped("spec.scheduling.tolerations", "");
            }
            scheduling.tolerations = tolerations;
        }
        let spread: Option<Vec<TopologySpreadConstraint>> =
            fields.take_as("topologySpreadConstraints")?;
        if let Some(spread) = spread {
            if !spread.is_empty() {
                let note = if selects_old_pods(&serde_json::to_value(&spread).unwrap_or_default()) {
                    OLD_LABELS_NOTE
                } else {
                    ""
                };
                log.mapped("spec.scheduling.topologySpreadConstraints", note);
            }
            scheduling.topology_spread_constraints = spread;
        }
        if let Some(class) = log.take_text(&mut fields, "PriorityClassName")? {
            log.changed(
                "spec.scheduling.PriorityClassName",
                "spec.scheduling.priorityClassName",
                "renamed (lower-case p)",
            );
            scheduling.priority_class_name = Some(class);
        }
        log.unknown(fields);
    }
    if let Some(affinity) = deprecated {
        if scheduling.affinity.is_some() {
            log.dropped(
                "spec.affinity",
                &json!(affinity),
                "spec.scheduling.affinity is set and wins, as it did there",
            );
        } else {
            scheduling.affinity = affinity_of(affinity, name, "spec.affinity", log);
        }
    }
    Ok(Some(scheduling).filter(|s| *s != SchedulingSpec::default()))
}

const OLD_LABELS_NOTE: &str = "it selects the other operator's pod labels (app: infinispan-pod, clusterName, infinispan_cr); this operator's pods carry app.kubernetes.io/name: infinispan and app.kubernetes.io/instance: <cluster>";

/// An affinity, unless it is the other operator's default (which this operator applies too).
fn affinity_of(affinity: Affinity, name: &str, path: &str, log: &mut Log) -> Option<Affinity> {
    let value = serde_json::to_value(&affinity).unwrap_or_default();
    if value == default_affinity(name) {
        log.removed(
            path,
            "the other operator's default (prefer one pod per node, by its pod labels): without an affinity this operator prefers spreading the pods over nodes",
        );
        return None;
    }
    let note = if selects_old_pods(&value) {
        OLD_LABELS_NOTE
    } else {
        ""
    };
    if path == "spec.scheduling.affinity" {
        log.mapped(path, note);
    } else {
        log.changed(
            path,
            "spec.scheduling.affinity",
            &format!(
                "moved{}",
                if note.is_empty() {
                    String::new()
                } else {
                    format!("; {note}")
                }
            ),
        );
    }
    Some(affinity)
}

/// The affinity infinispan-operator's webhook gave a cluster without one.
fn default_affinity(name: &str) -> Value {
    json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {
                "app": "infinispan-pod", "clusterName": name, "infinispan_cr": name
            }},
            "topologyKey": "kubernetes.io/hostname"
        }
    }]}})
}

/// Whether a label selector in `value` names the other operator's pod labels.
fn selects_old_pods(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, value)| {
            (key == "matchLabels"
                && value.as_object().is_some_and(|labels| {
                    labels.get("app") == Some(&json!("infinispan-pod"))
                        || labels.contains_key("clusterName")
                        || labels.contains_key("infinispan_cr")
                }))
                || selects_old_pods(value)
        }),
        Value::Array(items) => items.iter().any(selects_old_pods),
        _ => false,
    }
}

fn config_listener(
    fields: &mut Fields,
    operator: &mut ResourcesOperatorSpec,
    log: &mut Log,
) -> Result<(), FieldError> {
    if let Some(enabled) = fields.take_as::<bool>("enabled")? {
        log.changed(
            "spec.configListener.enabled",
            "spec.resourcesOperator.enabled",
            "renamed; it syncs all five kinds both ways instead of mirroring caches",
        );
        operator.enabled = enabled;
    }
    if let Some(mut logging) = fields.take_object("logging")? {
        if let Some(level) = logging.take_as::<LogLevel>("level")? {
            log.changed(
                "spec.configListener.logging.level",
                "spec.resourcesOperator.logLevel",
                &format!("renamed ({})", show(&json!(level))),
            );
            operator.log_level = level;
        }
        log.unknown(logging);
    }
    operator.resources = requirements(fields, "spec.resourcesOperator.resources", log)?;
    log.drop_field(
        fields,
        "serviceAccountName",
        "not supported: the operator creates a least-privilege ServiceAccount and Role per cluster",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::sites::router_address_ok;

    #[test]
    fn limit_and_request_as_infinispan_operator_reads_them() {
        let pair = |l: &str, r: &str| Some((l.to_string(), r.to_string()));
        assert_eq!(limit_and_request("2000m:1000m"), pair("2000m", "1000m"));
        assert_eq!(limit_and_request("2Gi"), pair("2Gi", "2Gi"));
        assert_eq!(limit_and_request(""), None);
        assert_eq!(limit_and_request("1:2:3"), None);
        assert_eq!(limit_and_request("1:"), None);
    }

    #[test]
    fn versions() {
        assert_eq!(major_minor("15.0.10"), Some((15, 0)));
        assert_eq!(major_minor("16.1.0-SNAPSHOT"), Some((16, 1)));
        assert_eq!(major_minor("x"), None);
    }

    #[test]
    fn router_addresses_the_schema_accepts() {
        assert!(router_address_ok("nyc.example.com", Some("31900")));
        assert!(router_address_ok("10.0.0.7", None));
        assert!(!router_address_ok("NYC.example.com", None));
        assert!(!router_address_ok("nyc-.example.com", None));
        assert!(!router_address_ok("", None));
        assert!(!router_address_ok("nyc", Some("")));
        assert!(!router_address_ok("nyc", Some("0")));
        assert!(!router_address_ok("nyc", Some("65536")));
        assert!(!router_address_ok("nyc", Some("79:00")));
    }

    #[test]
    fn the_default_anti_affinity_is_recognised() {
        let affinity: Affinity =
            serde_json::from_value(default_affinity("a")).unwrap_or_else(|e| panic!("{e}"));
        let mut log = Log::default();
        assert_eq!(
            affinity_of(affinity.clone(), "a", "spec.scheduling.affinity", &mut log),
            None
        );
        assert!(selects_old_pods(&default_affinity("a")));
        assert_eq!(
            affinity_of(affinity.clone(), "b", "spec.scheduling.affinity", &mut log),
            Some(affinity)
        );
        assert_eq!(log.fields[1].note, OLD_LABELS_NOTE);
    }
}

#[cfg(test)]
mod conversion_tests {
    use super::super::tests::{assert_field, only_report};
    use super::super::{Converted, Outcome};
    use crate::convert::sites::API_DISCOVERY_REASON;
    use common_crds::infinispan::ProbeSpec;
    use common_crds::labels::{
        POD_TARGET_ANNOTATIONS_ANNOTATION, POD_TARGET_LABELS_ANNOTATION,
        TARGET_ANNOTATIONS_ANNOTATION, TARGET_LABELS_ANNOTATION,
    };
    use common_crds::sites::{
        LocalSite, RouterHeartbeats, SiteDiscovery, SiteDiscoveryType, SiteEncryption, SiteExpose,
        SiteExposeType, SiteKeyStore, SiteLocation, SiteTrustStore, SitesSpec, TlsProtocol,
    };

    fn cluster(spec: &str) -> (common_crds::Infinispan, super::super::ObjectReport) {
        let (objects, report) = only_report(&format!(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {{name: c, namespace: ns}}\nspec:\n{spec}"
        ));
        match objects.into_iter().next() {
            Some(Converted::Infinispan(cr)) => (*cr, report),
            other => panic!("not an Infinispan: {other:?}"),
        }
    }

    #[test]
    fn same_fields_are_mapped() {
        let (cr, report) = cluster(
            "  replicas: 3\n  version: 16.0.7\n  image: registry.example.com/server:16\n  configMapName: cfg\n  service:\n    container: {storage: 2Gi, storageClassName: fast, ephemeralStorage: true}\n  security: {endpointAuthentication: false, endpointSecretName: ids}\n  expose: {type: NodePort, nodePort: 31000, annotations: {a/b: c}}\n  logging: {categories: {org.infinispan: debug}}\n  container: {extraJvmOpts: -Xlog:gc, env: [{name: A, value: b}]}\n  scheduling: {tolerations: [{key: k, operator: Exists}]}\n",
        );
        for field in [
            "spec.replicas",
            "spec.version",
            "spec.image",
            "spec.configMapName",
            "spec.service.container.storage",
            "spec.service.container.storageClassName",
            "spec.service.container.ephemeralStorage",
            "spec.security.endpointAuthentication",
            "spec.security.endpointSecretName",
            "spec.expose.type",
            "spec.expose.nodePort",
            "spec.expose.annotations",
            "spec.logging.categories",
            "spec.container.extraJvmOpts",
            "spec.container.env",
            "spec.scheduling.tolerations",
        ] {
            assert_field(&report, field, Outcome::Mapped, Some(field), "");
        }
        assert!(!report.dropped_anything());
        assert_eq!(cr.spec.replicas, 3);
        assert_eq!(cr.spec.version.as_deref(), Some("16.0.7"));
        assert_eq!(cr.spec.service.container.storage.0, "2Gi");
        assert!(cr.spec.service.container.ephemeral_storage);
        assert!(!cr.spec.security.endpoint_authentication);
        assert_eq!(
            cr.spec.expose.as_ref().and_then(|e| e.node_port),
            Some(31000)
        );
        assert_eq!(cr.metadata.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn renamed_and_reformatted_fields_are_changed() {
        let (cr, report) = cluster(
            "  replicas: 1\n  version: 14.0.1\n  container: {cpu: '2:1', memory: 1Gi}\n  expose: {type: Route, host: h.example.com}\n  scheduling: {PriorityClassName: p}\n  configListener: {enabled: false, cpu: 100m, logging: {level: error}}\n  security:\n    endpointEncryption: {type: Service, certServiceName: service.beta.openshift.io}\n",
        );
        assert_field(
            &report,
            "spec.version",
            Outcome::Changed,
            Some("spec.version"),
            "14.0.1 is older than 16.0",
        );
        assert_eq!(
            cr.spec.version.as_deref(),
            Some(crate::cli::DEFAULT_SERVER_VERSION)
        );
        assert_field(
            &report,
            "spec.container.cpu",
            Outcome::Changed,
            Some("spec.container.resources.{limits,requests}.cpu"),
            "limit 2, request 1",
        );
        let resources = cr
            .spec
            .container
            .and_then(|c| c.resources)
            .unwrap_or_default();
        assert_eq!(resources.limits.unwrap_or_default()["memory"].0, "1Gi");
        assert_eq!(resources.requests.unwrap_or_default()["cpu"].0, "1");
        assert_field(
            &report,
            "spec.expose.type",
            Outcome::Mapped,
            Some("spec.expose.type"),
            "a Route <name>",
        );
        assert_field(
            &report,
            "spec.expose.host",
            Outcome::Mapped,
            Some("spec.expose.host"),
            "",
        );
        assert_field(
            &report,
            "spec.scheduling.PriorityClassName",
            Outcome::Changed,
            Some("spec.scheduling.priorityClassName"),
            "renamed",
        );
        assert_field(
            &report,
            "spec.configListener.enabled",
            Outcome::Changed,
            Some("spec.resourcesOperator.enabled"),
            "renamed",
        );
        assert_field(
            &report,
            "spec.configListener.logging.level",
            Outcome::Changed,
            Some("spec.resourcesOperator.logLevel"),
            "",
        );
        assert!(!cr.spec.resources_operator.enabled);
        assert_eq!(
            cr.spec.resources_operator.log_level,
            common_crds::infinispan::LogLevel::Error
        );
        assert_field(
            &report,
            "spec.security.endpointEncryption.type",
            Outcome::Changed,
            Some("spec.security.endpointEncryption.type"),
            "Service -> Secret",
        );
        assert_eq!(
            cr.spec
                .security
                .endpoint_encryption
                .cert_secret_name
                .as_deref(),
            Some("c-cert-secret")
        );
        assert_field(
            &report,
            "spec.security.endpointEncryption.certServiceName",
            Outcome::Dropped,
            None,
            "no platform-issued certificates",
        );
    }

    #[test]
    fn fields_without_equivalent_are_dropped_with_the_reason_of_the_table() {
        let (_, report) = cluster(
            "  replicas: 1\n  version: 16.0.7\n  container: {cliExtraJvmOpts: x, routerExtraJvmOpts: y}\n  service:\n    type: Cache\n    replicationFactor: 2\n    container: {livenessProbe: {handler: x}}\n  security:\n    credentialStoreSecretName: cs\n    authorization: {enabled: true, roles: [{name: r, permissions: [ALL]}]}\n    endpointEncryption: {type: Secret, certSecretName: t, clientCert: Authenticate, clientCertSecretName: ts}\n  expose: {type: LoadBalancer, port: 443}\n  logging: {pattern: '${env:PASSWORD} %m'}\n  autoscale: {minReplicas: 1, maxReplicas: 3, minMemUsagePercent: 10, maxMemUsagePercent: 80}\n  cloudEvents: {bootstrapServers: k:9092}\n  dependencies: {artifacts: [{url: 'http://x/a.jar'}]}\n  upgrades: {type: HotRodRolling}\n  configListener: {enabled: true, serviceAccountName: sa}\n  jmx: {enabled: true}\n  serviceAccountName: sa\n  surprise: 1\n",
        );
        for (field, reason) in [
            ("spec.container.cliExtraJvmOpts", "no CLI pods"),
            (
                "spec.container.routerExtraJvmOpts",
                "JVM options are the operator's",
            ),
            ("spec.service.type", "every cluster is what DataGrid was"),
            (
                "spec.service.replicationFactor",
                "set owners in your cache configurations",
            ),
            ("spec.autoscale", "scale subresource"),
            ("spec.cloudEvents", "not supported"),
            ("spec.dependencies.artifacts[0]", "hash must be sha256"),
            (
                "spec.configListener.serviceAccountName",
                "least-privilege ServiceAccount",
            ),
            ("spec.jmx", "not supported"),
            ("spec.serviceAccountName", "without a service account token"),
            ("spec.surprise", "not a field of infinispan-operator's API"),
            (
                "spec.service.container.livenessProbe.handler",
                "not a field of infinispan-operator's API",
            ),
        ] {
            assert_field(&report, field, Outcome::Dropped, None, reason);
        }
        assert!(report.dropped_anything());
        assert_field(
            &report,
            "spec.upgrades.type",
            Outcome::Changed,
            Some("spec.upgrades.type"),
            "HotRodRolling -> Shutdown",
        );
        assert_field(
            &report,
            "spec.logging.pattern",
            Outcome::Dropped,
            None,
            "Log4j lookup",
        );
        assert_field(
            &report,
            "spec.security.endpointEncryption.clientCert",
            Outcome::Mapped,
            Some("spec.security.endpointEncryption.clientCert"),
            "certificate's common name",
        );
        assert_field(
            &report,
            "spec.security.credentialStoreSecretName",
            Outcome::Mapped,
            Some("spec.security.credentialStoreSecretName"),
            "alias of the store credentials",
        );
        assert_field(
            &report,
            "spec.security.endpointEncryption.clientCertSecretName",
            Outcome::Mapped,
            Some("spec.security.endpointEncryption.clientCertSecretName"),
            "truststore.p12",
        );
        assert_field(
            &report,
            "spec.expose.port",
            Outcome::Mapped,
            Some("spec.expose.port"),
            "load balancer",
        );
        assert_field(
            &report,
            "spec.security.authorization.roles[0]",
            Outcome::Mapped,
            Some("spec.security.authorization.roles[0]"),
            "",
        );
    }

    #[test]
    fn values_this_operator_has_anyway_are_removed_without_a_drop() {
        let (cr, report) = cluster(
            "  replicas: 1\n  version: 16.0.7\n  service: {type: DataGrid, container: {startupProbe: {}}}\n  jmx: {}\n  expose: {type: NodePort, port: 11222}\n  autoscale: {disabled: true, minReplicas: 1, maxReplicas: 1, minMemUsagePercent: 1, maxMemUsagePercent: 2}\n  security:\n    authorization: {enabled: true}\n    endpointEncryption: {type: None, clientCert: None}\n  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: infinispan-pod, clusterName: c, infinispan_cr: c}}}}]}}\n",
        );
        assert!(!report.dropped_anything(), "{report:?}");
        assert_field(
            &report,
            "spec.service.type",
            Outcome::Changed,
            None,
            "DataGrid",
        );
        assert_field(
            &report,
            "spec.affinity",
            Outcome::Changed,
            None,
            "the other operator's default",
        );
        assert_field(
            &report,
            "spec.service.container.startupProbe",
            Outcome::Omitted,
            None,
            "empty",
        );
        assert_field(&report, "spec.jmx", Outcome::Omitted, None, "JMX off");
        assert_eq!(cr.spec.scheduling, None);
    }

    #[test]
    fn the_deprecated_affinity_moves_unless_scheduling_has_one() {
        let affinity = "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: Exists}]}]}}}";
        let (cr, report) = cluster(&format!("  replicas: 1\n  affinity: {affinity}\n"));
        assert_field(
            &report,
            "spec.affinity",
            Outcome::Changed,
            Some("spec.scheduling.affinity"),
            "moved",
        );
        assert!(cr.spec.scheduling.and_then(|s| s.affinity).is_some());
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("spec.version is not set"))
        );
        let (_, report) = cluster(&format!(
            "  replicas: 1\n  affinity: {affinity}\n  scheduling: {{affinity: {affinity}}}\n"
        ));
        assert_field(&report, "spec.affinity", Outcome::Dropped, None, "wins");
        assert_field(
            &report,
            "spec.scheduling.affinity",
            Outcome::Mapped,
            Some("spec.scheduling.affinity"),
            "",
        );
    }

    #[test]
    fn spread_constraints_and_lower_case_secret() {
        let (cr, report) = cluster(
            "  replicas: 1\n  version: 16.0.7\n  security: {endpointEncryption: {type: secret, certSecretName: t}}\n  scheduling:\n    topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {clusterName: c}}}]\n",
        );
        assert_field(
            &report,
            "spec.scheduling.topologySpreadConstraints",
            Outcome::Mapped,
            Some("spec.scheduling.topologySpreadConstraints"),
            "the other operator's pod labels",
        );
        assert_eq!(
            cr.spec
                .scheduling
                .map(|s| s.topology_spread_constraints.len()),
            Some(1)
        );
        assert_field(
            &report,
            "spec.security.endpointEncryption.type",
            Outcome::Changed,
            Some("spec.security.endpointEncryption.type"),
            "secret -> Secret",
        );
        assert_eq!(
            cr.spec.security.endpoint_encryption.type_,
            Some(common_crds::infinispan::EncryptionType::Secret)
        );
    }

    #[test]
    fn names_this_operator_cannot_use() {
        let (_, report) = only_report(&format!(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {{name: {}}}\nspec: {{replicas: 1, version: 16.0.7}}\n",
            "a".repeat(53)
        ));
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("at most 52 characters")),
            "{report:?}"
        );
        assert_eq!(report.outcome, Outcome::Changed);
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {name: cache-operator}\nspec: {replicas: 1, version: 16.0.7}\n",
        );
        assert!(objects.is_empty());
        assert_eq!(report.outcome, Outcome::Dropped);
        assert!(report.note.contains("refuses the name"), "{report:?}");
        assert!(report.dropped_anything());
    }

    #[test]
    fn metadata_is_kept_and_what_the_servers_wrote_omitted() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata:\n  name: c\n  uid: u\n  resourceVersion: '1'\n  managedFields: [{manager: m}]\n  labels: {a: b}\n  annotations: {x/y: z, infinispan.org/podTargetLabels: a}\nspec: {replicas: 1, version: 16.0.7}\nstatus: {replicas: 1}\n",
        );
        assert_field(
            &report,
            "metadata.uid",
            Outcome::Omitted,
            None,
            "API server",
        );
        assert_field(
            &report,
            "metadata.managedFields",
            Outcome::Omitted,
            None,
            "",
        );
        assert_field(&report, "status", Outcome::Omitted, None, "other operator");
        assert_field(
            &report,
            "metadata.annotations.infinispan.org/podTargetLabels",
            Outcome::Mapped,
            Some("metadata.annotations.infinispan.org/podTargetLabels"),
            "copied to the server pods",
        );
        let Some(Converted::Infinispan(cr)) = objects.first() else {
            panic!("an Infinispan");
        };
        assert_eq!(cr.metadata.uid, None);
        assert_eq!(cr.metadata.annotations.clone().unwrap_or_default().len(), 2);
        assert_eq!(cr.status, None);
    }

    /// infinispan-operator's `infinispan.org/monitoring`: `false` opts out of the ServiceMonitor
    /// here too; `true` is the default; the annotation itself is not kept.
    #[test]
    fn the_monitoring_annotation_becomes_the_service_monitor_switch() {
        let cr_of = |value: &str| {
            let (objects, report) = only_report(&format!(
                "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata:\n  name: c\n  annotations: {{infinispan.org/monitoring: '{value}'}}\nspec: {{replicas: 1, version: 16.0.7}}\n"
            ));
            let Some(Converted::Infinispan(cr)) = objects.first() else {
                panic!("an Infinispan");
            };
            (cr.clone(), report)
        };
        let path = "metadata.annotations.infinispan.org/monitoring";
        let (off, report) = cr_of("false");
        assert!(!off.spec.monitoring.service_monitor);
        assert_field(
            &report,
            path,
            Outcome::Changed,
            Some("spec.monitoring.serviceMonitor"),
            "no ServiceMonitor",
        );
        assert_eq!(off.metadata.annotations, None);
        let (on, report) = cr_of("true");
        assert!(on.spec.monitoring.service_monitor);
        assert_field(&report, path, Outcome::Changed, None, "the default here");
        assert_eq!(on.metadata.annotations, None);
        let (odd, report) = cr_of("maybe");
        assert!(odd.spec.monitoring.service_monitor);
        assert_field(
            &report,
            path,
            Outcome::Dropped,
            None,
            "neither true nor false",
        );
    }

    /// infinispan-operator's target annotations are kept (this operator reads them the same
    /// way), without the operator's own keys, which it never copies.
    #[test]
    fn target_annotations_are_kept_without_the_operators_keys() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata:\n  name: c\n  labels: {svc: a, app.kubernetes.io/name: x}\n  annotations:\n    infinispan.org/targetLabels: 'svc, app.kubernetes.io/name'\n    infinispan.org/podTargetLabels: app.kubernetes.io/name\n    infinispan.org/targetAnnotations: note\n    infinispan.org/podTargetAnnotations: 'note, infinispan.org/monitoring'\n    note: hello\nspec: {replicas: 1, version: 16.0.7}\n",
        );
        assert_field(
            &report,
            "metadata.annotations.infinispan.org/targetLabels",
            Outcome::Changed,
            Some("metadata.annotations.infinispan.org/targetLabels"),
            "svc: app.kubernetes.io/name named the operator's own keys",
        );
        assert_field(
            &report,
            "metadata.annotations.infinispan.org/podTargetLabels",
            Outcome::Dropped,
            None,
            "InvalidMetadata",
        );
        assert_field(
            &report,
            "metadata.annotations.infinispan.org/targetAnnotations",
            Outcome::Mapped,
            Some("metadata.annotations.infinispan.org/targetAnnotations"),
            "allowed prefix",
        );
        assert_field(
            &report,
            "metadata.annotations.infinispan.org/podTargetAnnotations",
            Outcome::Changed,
            Some("metadata.annotations.infinispan.org/podTargetAnnotations"),
            "note: infinispan.org/monitoring",
        );
        let Some(Converted::Infinispan(cr)) = objects.first() else {
            panic!("an Infinispan");
        };
        let annotations = cr.metadata.annotations.clone().unwrap_or_default();
        let get = |key: &str| annotations.get(key).map(String::as_str);
        assert_eq!(get(TARGET_LABELS_ANNOTATION), Some("svc"));
        assert_eq!(get(POD_TARGET_LABELS_ANNOTATION), None);
        assert_eq!(get(TARGET_ANNOTATIONS_ANNOTATION), Some("note"));
        assert_eq!(get(POD_TARGET_ANNOTATIONS_ANNOTATION), Some("note"));
        // What the converted CR gives is accepted by the builders.
        let mut cr = cr.clone();
        cr.metadata.namespace = Some("ns".into());
        cr.metadata.uid = Some("u".into());
        let added = crate::build::user_metadata::of(&cr).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            added.client_service.labels,
            [("svc".to_string(), "a".to_string())].into()
        );
    }

    #[test]
    fn probe_timings_and_the_grace_period_are_mapped() {
        let (cr, report) = cluster(
            "  replicas: 1\n  version: 16.0.7\n  service:\n    container:\n      terminationGracePeriodSeconds: 90\n      livenessProbe: {failureThreshold: 10, successThreshold: 3, periodSeconds: 0}\n      readinessProbe: {failureThreshold: 1, initialDelaySeconds: 1, periodSeconds: 1, successThreshold: 1, timeoutSeconds: 1}\n      startupProbe: {timeoutSeconds: -1}\n",
        );
        assert_field(
            &report,
            "spec.service.container.terminationGracePeriodSeconds",
            Outcome::Mapped,
            Some("spec.service.container.terminationGracePeriodSeconds"),
            "rolls the pods",
        );
        assert_field(
            &report,
            "spec.service.container.livenessProbe",
            Outcome::Mapped,
            Some("spec.service.container.livenessProbe"),
            "failureThreshold: the timing only",
        );
        assert_field(
            &report,
            "spec.service.container.livenessProbe.successThreshold",
            Outcome::Dropped,
            None,
            "must be 1",
        );
        assert_field(
            &report,
            "spec.service.container.livenessProbe.periodSeconds",
            Outcome::Omitted,
            None,
            "Kubernetes default",
        );
        assert_field(
            &report,
            "spec.service.container.readinessProbe",
            Outcome::Mapped,
            Some("spec.service.container.readinessProbe"),
            "failureThreshold, initialDelaySeconds, periodSeconds, successThreshold, timeoutSeconds",
        );
        assert_field(
            &report,
            "spec.service.container.startupProbe.timeoutSeconds",
            Outcome::Dropped,
            None,
            "below 1",
        );
        let container = &cr.spec.service.container;
        assert_eq!(container.termination_grace_period_seconds, Some(90));
        assert_eq!(
            container.liveness_probe,
            Some(ProbeSpec {
                failure_threshold: Some(10),
                ..ProbeSpec::default()
            })
        );
        assert_eq!(
            container.readiness_probe,
            Some(ProbeSpec {
                failure_threshold: Some(1),
                initial_delay_seconds: Some(1),
                period_seconds: Some(1),
                success_threshold: Some(1),
                timeout_seconds: Some(1),
            })
        );
        assert_eq!(container.startup_probe, None);
    }

    /// infinispan-operator's `spec.service.sites`: the router, its Service, TLS (with its trust
    /// store) and the locations by `infinispan+xsite://` URL carry over (the deprecated host and
    /// port as a URL); the router's resources and the remote Kubernetes API do not.
    #[test]
    fn sites_are_mapped_with_tls_and_without_the_remote_kubernetes_api() {
        let (cr, report) = cluster(
            "  replicas: 3\n  version: 16.0.7\n  service:\n    sites:\n      local:\n        name: LON\n        expose: {type: LoadBalancer, port: 65535, annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}}\n        maxRelayNodes: 2\n        encryption: {protocol: TLSv1.3, transportKeyStore: {secretName: tks, alias: transport, filename: keystore.p12}, routerKeyStore: {secretName: rks, alias: router, filename: keystore.p12}, trustStore: {secretName: ts, filename: truststore.p12}}\n        discovery: {type: gossiprouter, launchGossipRouter: true, memory: 512Mi, cpu: 500m, suspectEvents: true, heartbeats: {enabled: true, interval: 5000, timeout: 20000}}\n      locations:\n      - {name: NYC, url: 'infinispan+xsite://nyc.example.com:31900'}\n      - {name: SFO, host: sfo.example.com, port: 7901}\n      - {name: PAR, url: 'kubernetes://api.par.example.com:6443', namespace: team-b, clusterName: par, secretName: par-token}\n      - {name: BER, url: 'openshift://api.ber.example.com:6443', secretName: ber-token}\n      - {name: MAD, url: 'infinispan+xsite://mad.example.com', namespace: team-c, clusterName: mad, surprise: 1}\n",
        );
        let sites = "spec.service.sites";
        assert_eq!(
            cr.spec.service.sites,
            Some(SitesSpec {
                local: LocalSite {
                    name: "LON".into(),
                    expose: SiteExpose {
                        type_: SiteExposeType::LoadBalancer,
                        node_port: None,
                        port: Some(65535),
                        annotations: [(
                            "service.beta.kubernetes.io/aws-load-balancer-type".to_string(),
                            "nlb".to_string()
                        )]
                        .into(),
                    },
                    max_relay_nodes: 2,
                    discovery: SiteDiscovery {
                        type_: SiteDiscoveryType::GossipRouter,
                        launch_gossip_router: true,
                        suspect_events: true,
                        heartbeats: RouterHeartbeats {
                            enabled: true,
                            interval: 5000,
                            timeout: 20000,
                        },
                    },
                    encryption: Some(SiteEncryption {
                        protocol: TlsProtocol::TlsV13,
                        transport_key_store: SiteKeyStore {
                            secret_name: "tks".into(),
                            alias: Some("transport".into()),
                            filename: Some("keystore.p12".into()),
                        },
                        router_key_store: SiteKeyStore {
                            secret_name: "rks".into(),
                            alias: Some("router".into()),
                            filename: Some("keystore.p12".into()),
                        },
                        trust_store: SiteTrustStore {
                            secret_name: "ts".into(),
                            filename: Some("truststore.p12".into()),
                        },
                    }),
                },
                locations: vec![
                    location(
                        "NYC",
                        Some("infinispan+xsite://nyc.example.com:31900"),
                        None,
                        None
                    ),
                    location(
                        "SFO",
                        Some("infinispan+xsite://sfo.example.com:7901"),
                        None,
                        None
                    ),
                    location("PAR", None, Some("team-b"), Some("par")),
                    location(
                        "MAD",
                        Some("infinispan+xsite://mad.example.com"),
                        None,
                        None
                    ),
                ],
            })
        );
        for field in [
            "local.name",
            "local.expose.type",
            "local.expose.port",
            "local.expose.annotations",
            "local.maxRelayNodes",
            "local.encryption.protocol",
            "local.encryption.transportKeyStore.secretName",
            "local.encryption.transportKeyStore.alias",
            "local.encryption.transportKeyStore.filename",
            "local.encryption.routerKeyStore.secretName",
            "local.encryption.routerKeyStore.alias",
            "local.encryption.routerKeyStore.filename",
            "local.encryption.trustStore.secretName",
            "local.encryption.trustStore.filename",
            "local.discovery.type",
            "local.discovery.launchGossipRouter",
            "local.discovery.suspectEvents",
            "local.discovery.heartbeats.enabled",
            "local.discovery.heartbeats.interval",
            "local.discovery.heartbeats.timeout",
            "locations[0].name",
            "locations[0].url",
            "locations[4].url",
        ] {
            let field = format!("{sites}.{field}");
            assert_field(&report, &field, Outcome::Mapped, Some(&field), "");
        }
        assert_field(
            &report,
            &format!("{sites}.local.expose.type"),
            Outcome::Mapped,
            Some(&format!("{sites}.local.expose.type")),
            "the Service c-site in front of the site's gossip router; give the other sites the load balancer's address as infinispan+xsite://host:port",
        );
        assert_field(
            &report,
            &format!("{sites}.local.expose.annotations"),
            Outcome::Mapped,
            Some(&format!("{sites}.local.expose.annotations")),
            "on the Service c-site",
        );
        // The same Secrets, which must now allow the cluster.
        for (store, secret, file) in [
            ("transportKeyStore", "tks", "keystore.p12"),
            ("routerKeyStore", "rks", "keystore.p12"),
            ("trustStore", "ts", "truststore.p12"),
        ] {
            let field = format!("{sites}.local.encryption.{store}.secretName");
            let note = report
                .field(&field)
                .map(|entry| entry.note.clone())
                .unwrap_or_default();
            for part in [
                format!("the same keys (the store under {file}, its password under password"),
                format!("kubectl annotate secret {secret} infinispan.org/allow-clusters=c"),
            ] {
                assert!(note.contains(&part), "{field}: {note}");
            }
        }
        for (store, alias) in [
            ("transportKeyStore", "transport"),
            ("routerKeyStore", "router"),
        ] {
            let field = format!("{sites}.local.encryption.{store}.alias");
            assert_field(
                &report,
                &field,
                Outcome::Mapped,
                Some(&field),
                &format!("({alias} by default in both)"),
            );
        }
        // The truststore's type is its own Secret's here.
        assert_field(
            &report,
            &format!("{sites}.local.encryption.trustStore.secretName"),
            Outcome::Mapped,
            Some(&format!("{sites}.local.encryption.trustStore.secretName")),
            "where infinispan-operator took the transport keystore Secret's type",
        );
        assert!(report.field(&format!("{sites}.local.encryption")).is_none());
        for resource in ["memory", "cpu"] {
            assert_field(
                &report,
                &format!("{sites}.local.discovery.{resource}"),
                Outcome::Dropped,
                None,
                "requests 100m CPU and 256Mi memory, limit 256Mi memory",
            );
        }
        // The deprecated host and port become the url the other operator's webhook made.
        for key in ["host", "port"] {
            assert_field(
                &report,
                &format!("{sites}.locations[1].{key}"),
                Outcome::Changed,
                Some(&format!("{sites}.locations[1].url")),
                "infinispan+xsite://sfo.example.com:7901: host and port are deprecated there",
            );
        }
        // An API URL is dropped; the namespace and clusterName now locate the site here.
        assert_field(
            &report,
            &format!("{sites}.locations[2].url"),
            Outcome::Dropped,
            None,
            API_DISCOVERY_REASON,
        );
        for key in ["namespace", "clusterName"] {
            let field = format!("{sites}.locations[2].{key}");
            assert_field(
                &report,
                &field,
                Outcome::Changed,
                Some(&field),
                "locates the site in this Kubernetes cluster",
            );
        }
        assert_field(
            &report,
            &format!("{sites}.locations[2].secretName"),
            Outcome::Dropped,
            None,
            "a token for the remote Kubernetes API, not used here",
        );
        // Nothing else locates BER: the whole location is dropped, with the reason.
        assert_field(
            &report,
            &format!("{sites}.locations[3]"),
            Outcome::Dropped,
            None,
            API_DISCOVERY_REASON,
        );
        assert!(report.field(&format!("{sites}.locations[3].url")).is_none());
        // With url, namespace and clusterName go (unused there too).
        for key in ["namespace", "clusterName"] {
            assert_field(
                &report,
                &format!("{sites}.locations[4].{key}"),
                Outcome::Changed,
                None,
                "with url, the location is found by its url",
            );
        }
        assert_field(
            &report,
            &format!("{sites}.locations[4].surprise"),
            Outcome::Dropped,
            None,
            "not a field of infinispan-operator's API",
        );
        assert!(report.dropped_anything());
    }

    /// A site exposed by a Route gets the default ClusterIP; what the schema here refuses is
    /// dropped.
    #[test]
    fn a_site_exposed_by_a_route_falls_back_to_cluster_ip() {
        let (cr, report) = cluster(
            "  replicas: 1\n  version: 16.0.7\n  service:\n    sites:\n      local:\n        name: LON\n        expose: {type: Route, routeHostName: xsite.example.com, nodePort: 31000, port: 443}\n        encryption: {transportKeyStore: {secretName: tks}, routerKeyStore: {secretName: rks}}\n        maxRelayNodes: 0\n        discovery: {launchGossipRouter: false, heartbeats: {interval: 500, timeout: 8000}}\n      locations:\n      - {name: NYC, namespace: team-b}\n      - {name: SFO, host: SFO.example.com}\n      - {name: BER, port: 7900}\n",
        );
        let sites = "spec.service.sites";
        let Some(converted) = cr.spec.service.sites else {
            panic!("sites: {report:?}");
        };
        assert_eq!(converted.local.expose, SiteExpose::default());
        assert_eq!(converted.local.expose.type_, SiteExposeType::ClusterIP);
        assert_eq!(converted.local.max_relay_nodes, 1);
        assert!(!converted.local.discovery.launch_gossip_router);
        assert_eq!(
            converted.local.discovery.heartbeats,
            RouterHeartbeats::default()
        );
        assert_eq!(
            converted.locations,
            vec![location("NYC", None, Some("team-b"), None)]
        );
        assert_field(
            &report,
            &format!("{sites}.local.expose.type"),
            Outcome::Dropped,
            None,
            "there is no Route for the gossip router here",
        );
        let route = report
            .field(&format!("{sites}.local.expose.type"))
            .map(|entry| entry.note.clone())
            .unwrap_or_default();
        for part in [
            "the default ClusterIP",
            "set LoadBalancer or NodePort",
            "infinispan+xsite://host:port",
        ] {
            assert!(route.contains(part), "{route}");
        }
        assert_field(
            &report,
            &format!("{sites}.local.expose.routeHostName"),
            Outcome::Dropped,
            None,
            "no Route",
        );
        assert_field(
            &report,
            &format!("{sites}.local.expose.nodePort"),
            Outcome::Dropped,
            None,
            "only with type NodePort",
        );
        assert_field(
            &report,
            &format!("{sites}.local.expose.port"),
            Outcome::Changed,
            None,
            "used only by a LoadBalancer",
        );
        // No trustStore: the whole encryption is dropped, the site would talk plain text.
        assert_eq!(converted.local.encryption, None);
        let encryption = format!("{sites}.local.encryption");
        assert_field(&report, &encryption, Outcome::Dropped, None, "");
        let reason = report
            .field(&encryption)
            .map(|entry| entry.note.clone())
            .unwrap_or_default();
        for part in [
            "spec.service.sites.local.encryption.trustStore is missing, and it is required here",
            "trustStore.secretName",
            "under truststore.p12 (or trustStore.filename)",
            "its password under password",
            "infinispan.org/allow-clusters=c",
            "talks plain text",
            "do not apply the converted CR as is",
        ] {
            assert!(reason.contains(part), "{reason}");
        }
        // Its fields are not reported one by one.
        assert!(
            report
                .fields
                .iter()
                .all(|entry| !entry.field.starts_with(&format!("{encryption}.")))
        );
        assert!(report.dropped_anything());
        assert_field(
            &report,
            &format!("{sites}.local.maxRelayNodes"),
            Outcome::Omitted,
            None,
            "1 by default",
        );
        assert_field(
            &report,
            &format!("{sites}.local.discovery.heartbeats.interval"),
            Outcome::Dropped,
            None,
            "below 1000 ms",
        );
        // 8000 ms is not longer than the default interval (10000 ms).
        assert_field(
            &report,
            &format!("{sites}.local.discovery.heartbeats.timeout"),
            Outcome::Dropped,
            None,
            "the timeout must be longer than the interval here",
        );
        assert_field(
            &report,
            &format!("{sites}.locations[0].namespace"),
            Outcome::Mapped,
            Some(&format!("{sites}.locations[0].namespace")),
            "this Kubernetes cluster",
        );
        assert_field(
            &report,
            &format!("{sites}.locations[1]"),
            Outcome::Dropped,
            None,
            "a lower-case DNS name",
        );
        assert_field(
            &report,
            &format!("{sites}.locations[2]"),
            Outcome::Dropped,
            None,
            "nothing locates the site",
        );
    }

    /// TLSv1.2 and the default aliases and file names carry over; another protocol is dropped
    /// (the default applies); a keystore without its Secret makes the encryption unusable.
    #[test]
    fn site_encryption_protocols_defaults_and_unusable_stores() {
        let spec = |encryption: &str| {
            format!(
                "  replicas: 1\n  service:\n    sites:\n      local:\n        name: LON\n        encryption: {encryption}\n      locations:\n      - {{name: NYC, namespace: team-b}}\n"
            )
        };
        let encryption = "spec.service.sites.local.encryption";
        let (cr, report) = cluster(&spec(
            "{protocol: TLSv1.2, transportKeyStore: {secretName: ks}, routerKeyStore: {secretName: ks, alias: gr, filename: router.p12}, trustStore: {secretName: ts}}",
        ));
        let local = cr.spec.service.sites.map(|sites| sites.local);
        assert_eq!(
            local.and_then(|local| local.encryption),
            Some(SiteEncryption {
                protocol: TlsProtocol::TlsV12,
                transport_key_store: SiteKeyStore {
                    secret_name: "ks".into(),
                    alias: None,
                    filename: None,
                },
                router_key_store: SiteKeyStore {
                    secret_name: "ks".into(),
                    alias: Some("gr".into()),
                    filename: Some("router.p12".into()),
                },
                trust_store: SiteTrustStore {
                    secret_name: "ts".into(),
                    filename: None,
                },
            })
        );
        let protocol = format!("{encryption}.protocol");
        assert_field(&report, &protocol, Outcome::Mapped, Some(&protocol), "");
        let router = format!("{encryption}.routerKeyStore.secretName");
        assert_field(
            &report,
            &router,
            Outcome::Mapped,
            Some(&router),
            "the store under router.p12",
        );
        assert!(!report.dropped_anything(), "{report:?}");

        let (cr, report) = cluster(&spec(
            "{protocol: TLSv1.1, transportKeyStore: {secretName: ks}, routerKeyStore: {secretName: ks}, trustStore: {secretName: ts}}",
        ));
        let local = cr.spec.service.sites.map(|sites| sites.local);
        assert_eq!(
            local
                .and_then(|local| local.encryption)
                .map(|encryption| encryption.protocol),
            Some(TlsProtocol::TlsV13)
        );
        assert_field(
            &report,
            &protocol,
            Outcome::Dropped,
            None,
            "TLSv1.3, the default, applies",
        );

        let (cr, report) = cluster(&spec(
            "{transportKeyStore: {alias: transport}, routerKeyStore: {secretName: ks, filename: 'a/b'}, trustStore: {secretName: ts}}",
        ));
        assert_eq!(
            cr.spec
                .service
                .sites
                .and_then(|sites| sites.local.encryption),
            None
        );
        assert_field(
            &report,
            encryption,
            Outcome::Dropped,
            None,
            "transportKeyStore.secretName is missing",
        );
        let reason = report
            .field(encryption)
            .map(|entry| entry.note.clone())
            .unwrap_or_default();
        for part in [
            "routerKeyStore.filename \"a/b\" is not a key a Secret can have",
            "talks plain text",
        ] {
            assert!(reason.contains(part), "{reason}");
        }
    }

    fn location(
        name: &str,
        url: Option<&str>,
        namespace: Option<&str>,
        cluster_name: Option<&str>,
    ) -> SiteLocation {
        SiteLocation {
            name: name.into(),
            url: url.map(Into::into),
            namespace: namespace.map(Into::into),
            cluster_name: cluster_name.map(Into::into),
        }
    }
}
