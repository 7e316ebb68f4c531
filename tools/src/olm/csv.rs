//! The ClusterServiceVersion of the bundle, built from what the operator is made of: the CRDs
//! of `common-crds` (kinds, versions, descriptions, descriptor descriptions and select options
//! read from their schemas, [`super::owned`]), the rules of [`cluster_operator::rbac`], the image and flag
//! defaults of [`cluster_operator::cli`], the operator's Deployment
//! ([`super::deployment`]).
//!
//! Choices:
//! - **Capability level `Basic Install`.** The operator installs and runs clusters, and takes
//!   backups and restores (a level-3 feature), but the levels are cumulative and level 2,
//!   `Seamless Upgrades`, is not there: it knows one server version and has no upgrade
//!   procedure for a server version change (a change of `spec.version` is a plain rolling
//!   update), and this is the first operator release (no `replaces`).
//! - **Install modes: all four.** The Deployment reads `WATCH_NAMESPACE` from the pod's
//!   `olm.targetNamespaces` annotation: one namespace (OwnNamespace, SingleNamespace), a
//!   comma-separated list (MultiNamespace), or the empty string (AllNamespaces), which
//!   [`cluster_operator::scope::resolve`] reads as all namespaces.
//! - **Permissions**: [`cluster_operator::rbac::rules`], which OLM grants in the operator's namespace and
//!   every target namespace (cluster-wide in AllNamespaces mode); they include the Lease and
//!   Events rules the operator needs in its own namespace. **Cluster permissions**:
//!   [`cluster_operator::rbac::label_policy_rules`] only, so the operator applies the label policy itself
//!   (a bundle cannot carry a ValidatingAdmissionPolicy).
//! - **Images**: the operator's, the resources operator's and the server's are in
//!   `relatedImages` and given to the operator by environment variables in one place, so a
//!   mirror rewrites them together.
//! - `createdAt` is fixed ([`CREATED_AT`]): generated files must be reproducible.
//! - No `maintainers`: the project has no maintainer address to publish yet (operatorhub's
//!   validator requires an email for each maintainer listed).

use base64::Engine;
use common_crds::ResourceKind;
use common_crds::labels::CLUSTER_LABEL;
use serde_json::{Value, json};

use super::deployment::{DEPLOYMENT_NAME, SERVICE_ACCOUNT, operator_deployment, pod_labels};
use super::owned::{examples, owned_crds};
use super::{OPERATOR_IMAGE, OlmError, PACKAGE, VERSION, csv_name};
use cluster_operator::cli::{DEFAULT_RESOURCES_OPERATOR_IMAGE, SERVER_IMAGES};

/// When this version's CSV was made (fixed, so the file is reproducible; set with the version).
pub const CREATED_AT: &str = "2026-11-30T00:00:00Z";
/// Oldest Kubernetes the operator supports: the label policy is an
/// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy (GA in 1.30).
pub const MIN_KUBE_VERSION: &str = "1.30.0";
/// The operator capability level (see the module documentation).
pub const CAPABILITY: &str = "Basic Install";
/// OperatorHub category.
pub const CATEGORIES: &str = "Database";
/// The short description (tiles, search results).
pub const SHORT_DESCRIPTION: &str = "Runs Infinispan clusters, their backups and restores, and keeps caches, templates, counters, schemas and tasks in sync with Kubernetes in both directions.";

const ICON_SVG: &str = include_str!("icon.svg");

/// The icon, an SVG, base64-encoded (`{base64data, mediatype}`).
pub fn icon() -> Value {
    json!({
        "base64data": base64::engine::general_purpose::STANDARD.encode(ICON_SVG),
        "mediatype": "image/svg+xml",
    })
}

/// The long description (markdown), shown on the operator's page.
pub fn description() -> String {
    let resource_kinds = ResourceKind::phrase(|kind| format!("**{kind}**"));
    format!(
        "\
[Infinispan](https://infinispan.org) is an open-source in-memory data grid: a distributed \
key-value store and cache with a REST and Hot Rod API.

This operator, written in Rust, runs Infinispan clusters on Kubernetes:

- **Infinispan**: a cluster (StatefulSet, Services, generated configuration and credentials, \
optional external exposure, PodDisruptionBudget), with status conditions and scaling through \
the scale subresource.
- **Backup** and **Restore**: an archive of a cluster's caches, templates, counters, schemas and \
tasks, and its restoration into another cluster.
- **Batch**: an Infinispan CLI script run once against a cluster by a Job, its outcome and the \
CLI's error lines in the status.
- {resource_kinds}: server resources as CRs, \
labelled `{CLUSTER_LABEL}=<cluster>`. Each cluster gets its own *resources operator* (a small \
Deployment with least-privilege RBAC) that keeps them in sync with the server **in both \
directions**: a cache created by an application on the server appears as a Cache CR, and a \
Cache CR applied with kubectl appears on the server.

### Install modes

All four: the operator watches the OperatorGroup's target namespaces (one, a list, or all). It \
elects a leader through a Lease in its own namespace, so more replicas wait as standbys.

### Cluster permissions

Besides its namespaced permissions, the operator asks for `get`, `create` and `patch` of \
ValidatingAdmissionPolicies and their bindings, cluster-wide: at startup it applies the policy \
that keeps the `{CLUSTER_LABEL}` label of the resource CRs from changing (an OLM bundle cannot \
carry admission policies).

### Documentation

The README, the sync contract and the backup guide are in the [repository]({repository}).
",
        repository = env!("CARGO_PKG_REPOSITORY")
    )
}

/// The ClusterServiceVersion.
pub fn csv() -> Result<Value, OlmError> {
    let owned = owned_crds().map_err(OlmError::Csv)?;
    let examples = serde_json::to_string_pretty(&examples().map_err(OlmError::Json)?)
        .map_err(OlmError::Json)?;
    let repository = env!("CARGO_PKG_REPOSITORY");
    let mut related_images = vec![
        json!({ "name": "cluster-operator", "image": OPERATOR_IMAGE }),
        json!({ "name": "resources-operator", "image": DEFAULT_RESOURCES_OPERATOR_IMAGE }),
    ];
    related_images.extend(SERVER_IMAGES.iter().map(|(version, image)| {
        json!({ "name": format!("infinispan-server-{version}"), "image": image })
    }));
    Ok(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": csv_name(),
            "annotations": {
                "alm-examples": examples,
                "capabilities": CAPABILITY,
                "categories": CATEGORIES,
                "containerImage": OPERATOR_IMAGE,
                "createdAt": CREATED_AT,
                "description": SHORT_DESCRIPTION,
                "operatorframework.io/suggested-namespace": PACKAGE,
                "repository": repository,
                "support": "Infinispan operators project",
            },
        },
        "spec": {
            "displayName": "Infinispan Operators",
            "description": description(),
            "version": VERSION,
            "maturity": "alpha",
            "minKubeVersion": MIN_KUBE_VERSION,
            "keywords": ["infinispan", "data grid", "cache", "in-memory", "key-value", "nosql", "backup"],
            "provider": { "name": "Infinispan operators project", "url": repository },
            "links": [
                { "name": "Source code and documentation", "url": repository },
                { "name": "Infinispan", "url": "https://infinispan.org" },
            ],
            "icon": [icon()],
            "installModes": [
                { "type": "OwnNamespace", "supported": true },
                { "type": "SingleNamespace", "supported": true },
                { "type": "MultiNamespace", "supported": true },
                { "type": "AllNamespaces", "supported": true },
            ],
            "customresourcedefinitions": { "owned": owned },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{
                        "name": DEPLOYMENT_NAME,
                        "label": pod_labels(),
                        "spec": operator_deployment(),
                    }],
                    "permissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": cluster_operator::rbac::rules(),
                    }],
                    "clusterPermissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": cluster_operator::rbac::label_policy_rules(),
                    }],
                },
            },
            "relatedImages": related_images,
        },
    }))
}

/// The CSV as YAML, with a header saying where it comes from.
pub fn csv_yaml() -> Result<String, OlmError> {
    super::yaml_with_header(
        "Generated by `xtask olm --dir olm` (`make crds`) from the operator's sources\n\
         (tools/src/olm/csv.rs): do not edit, a test fails when this copy is stale.",
        "the ClusterServiceVersion",
        &csv()?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_operator::rbac::allows;
    use cluster_operator::scope::{WatchScope, resolve};
    use k8s_openapi::api::rbac::v1::PolicyRule;

    fn csv_value() -> Value {
        csv().expect("the CSV builds")
    }

    #[test]
    fn the_annotation_holds_the_examples() {
        let csv = csv_value();
        let text = csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .expect("alm-examples is a string");
        let parsed: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(parsed, Value::Array(examples().expect("examples")));
    }

    #[test]
    fn every_value_olm_gives_watch_namespace_is_understood() {
        // OwnNamespace and SingleNamespace: one name; MultiNamespace: a list; AllNamespaces: "".
        assert_eq!(
            resolve(Some("operators"), true, Some("operators")),
            Ok(WatchScope::Namespaces(["operators".to_string()].into()))
        );
        assert_eq!(
            resolve(Some("team-a"), true, Some("operators")),
            Ok(WatchScope::Namespaces(["team-a".to_string()].into()))
        );
        assert_eq!(
            resolve(Some("team-a,team-b"), true, Some("operators")),
            Ok(WatchScope::Namespaces(
                ["team-a".to_string(), "team-b".to_string()].into()
            ))
        );
        assert_eq!(
            resolve(Some(""), true, Some("operators")),
            Ok(WatchScope::All)
        );
        let csv = csv_value();
        let modes = csv["spec"]["installModes"].as_array().expect("modes");
        assert_eq!(modes.len(), 4);
        assert!(modes.iter().all(|m| m["supported"] == true));
    }

    #[test]
    fn permissions_cover_what_the_operator_does_in_its_namespace() {
        let csv = csv_value();
        let strategy = &csv["spec"]["install"]["spec"];
        let rules: Vec<PolicyRule> =
            serde_json::from_value(strategy["permissions"][0]["rules"].clone()).expect("rules");
        assert_eq!(rules, cluster_operator::rbac::rules());
        for verb in ["get", "create", "update"] {
            assert!(
                allows(&rules, "coordination.k8s.io", "leases", verb),
                "{verb}"
            );
        }
        for verb in ["create", "patch"] {
            assert!(allows(&rules, "events.k8s.io", "events", verb), "{verb}");
        }
        let cluster_rules: Vec<PolicyRule> =
            serde_json::from_value(strategy["clusterPermissions"][0]["rules"].clone())
                .expect("cluster rules");
        assert_eq!(cluster_rules, cluster_operator::rbac::label_policy_rules());
        for account in [
            &strategy["permissions"][0]["serviceAccountName"],
            &strategy["clusterPermissions"][0]["serviceAccountName"],
        ] {
            assert_eq!(account, SERVICE_ACCOUNT);
        }
    }

    #[test]
    fn related_images_name_every_image_the_operator_runs() {
        let csv = csv_value();
        let images: Vec<&str> = csv["spec"]["relatedImages"]
            .as_array()
            .expect("related images")
            .iter()
            .filter_map(|i| i["image"].as_str())
            .collect();
        assert!(images.contains(&OPERATOR_IMAGE));
        assert!(images.contains(&DEFAULT_RESOURCES_OPERATOR_IMAGE));
        for (_, image) in SERVER_IMAGES {
            assert!(images.contains(&image));
        }
        assert_eq!(
            csv["metadata"]["annotations"]["containerImage"],
            OPERATOR_IMAGE
        );
    }

    #[test]
    fn metadata_is_valid_for_operatorhub() {
        let csv = csv_value();
        let annotations = &csv["metadata"]["annotations"];
        assert!(
            [
                "Basic Install",
                "Seamless Upgrades",
                "Full Lifecycle",
                "Deep Insights",
                "Auto Pilot"
            ]
            .contains(&annotations["capabilities"].as_str().unwrap_or_default())
        );
        assert!(
            annotations["createdAt"]
                .as_str()
                .unwrap_or_default()
                .ends_with('Z')
        );
        let icon = &csv["spec"]["icon"][0];
        let svg = base64::engine::general_purpose::STANDARD
            .decode(icon["base64data"].as_str().expect("data"))
            .expect("base64");
        assert!(String::from_utf8(svg).expect("UTF-8").starts_with("<svg"));
        assert_eq!(csv["spec"]["version"], VERSION);
        for url in [
            &csv["metadata"]["annotations"]["repository"],
            &csv["spec"]["provider"]["url"],
            &csv["spec"]["links"][0]["url"],
        ] {
            assert!(
                url.as_str().unwrap_or_default().starts_with("https://"),
                "{url}"
            );
        }
        assert!(csv["metadata"]["name"].as_str().unwrap_or_default().len() <= 63);
    }

    #[test]
    fn the_yaml_is_reproducible() {
        assert_eq!(csv_yaml().expect("yaml"), csv_yaml().expect("yaml"));
        assert!(csv_yaml().expect("yaml").starts_with("# Generated by"));
    }
}
