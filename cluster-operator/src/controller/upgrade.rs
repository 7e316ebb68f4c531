//! Server versions across changes of the CR and of the operator (issue 24, upgrade strategies),
//! decided from the CR and the StatefulSet (pure):
//!
//! - **A cluster keeps the version it runs.** The StatefulSet records the version applied
//!   ([`VERSION_ANNOTATION`]); a CR without `spec.version` is built with that version, not the
//!   operator's default. So an operator upgrade with a newer default version rolls no cluster:
//!   users choose when, by setting `spec.version`. A StatefulSet of an earlier release has no
//!   annotation: the CR's `status.version` (what that release applied) stands in.
//! - **No downgrade by mistake.** A `spec.version` below the version the cluster runs is
//!   refused (`Degraded=True, VersionDowngrade`) unless `spec.upgrades.allowDowngrade`.
//! - **`spec.upgrades.type: Shutdown`.** A new server image for a running cluster is not rolled
//!   pod by pod: the cluster is stopped gracefully ([`super::graceful_stop`]) while the new pod
//!   template waits (the StatefulSet's update partition holds every pod), then every pod starts
//!   on it.

use common_crds::Infinispan;
use common_crds::infinispan::UpgradeType;
use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetUpdateStrategy,
};

use crate::build::server::{CONTAINER_NAME, ServerImages};

/// Annotation of the StatefulSet: the server version applied (e.g. `16.0.7`).
pub const VERSION_ANNOTATION: &str = "infinispan.org/server-version";

/// The version the cluster runs, as far as the operator applied it: the StatefulSet's
/// annotation, else (a StatefulSet an earlier release created) `status_version`; `None` before
/// the StatefulSet exists.
pub fn running_version(
    existing: Option<&StatefulSet>,
    status_version: Option<&str>,
) -> Option<String> {
    let sts = existing?;
    sts.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VERSION_ANNOTATION))
        .map(String::as_str)
        .or(status_version)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The version to build: the CR's, else the one the cluster runs (`None`: the operator's
/// default, for a new cluster).
pub fn pinned(spec_version: Option<&str>, running: Option<&str>) -> Option<String> {
    spec_version
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .or(running)
        .map(str::to_string)
}

/// What the versions decide for a reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// The version to build ([`pinned`]).
    pub version: Option<String>,
    /// Why `spec.version` is refused as a downgrade ([`downgrade`]).
    pub downgrade: Option<String>,
    /// The image changes by a Shutdown upgrade ([`shutdown_upgrade`]).
    pub shutdown_upgrade: bool,
}

/// The versions of `cluster` whose StatefulSet is `existing`, with the operator's `images`.
pub fn decide(
    cluster: &Infinispan,
    existing: Option<&StatefulSet>,
    images: &ServerImages,
) -> Versions {
    let spec = &cluster.spec;
    let running = running_version(
        existing,
        cluster.status.as_ref().and_then(|s| s.version.as_deref()),
    );
    let version = pinned(spec.version.as_deref(), running.as_deref());
    let downgrade =
        spec.version
            .as_deref()
            .zip(running.as_deref())
            .and_then(|(requested, running)| {
                downgrade(requested, running, spec.upgrades.allow_downgrade)
            });
    let mut built = cluster.clone();
    built.spec.version = version.clone();
    let shutdown_upgrade = images
        .resolve(&built)
        .is_ok_and(|image| shutdown_upgrade(spec.upgrades.type_, existing, &image.image));
    Versions {
        version,
        downgrade,
        shutdown_upgrade,
    }
}

/// The refusal of a `requested` version below the `running` one, unless `allowed`.
pub fn downgrade(requested: &str, running: &str, allowed: bool) -> Option<String> {
    let (wanted, current) = (numbers(requested)?, numbers(running)?);
    (wanted < current && !allowed).then(|| {
        format!(
            "spec.version {requested} is older than {running}, the version the cluster runs: a server may refuse the state a newer one wrote to the data volumes. Set spec.version back to {running} or later, or set spec.upgrades.allowDowngrade: true to go ahead (keep a copy of the data first)"
        )
    })
}

/// The numeric parts of `16.0.7` / `16.0.7.Final` / `16.1`: `[16, 0, 7]`, compared in order.
fn numbers(version: &str) -> Option<Vec<u32>> {
    let parts: Vec<u32> = version
        .trim()
        .split('.')
        .map_while(|part| part.parse().ok())
        .collect();
    (parts.len() >= 2).then_some(parts)
}

/// Whether going to `desired_image` is a Shutdown upgrade: the strategy says so, and the
/// StatefulSet has pods and runs another server image.
pub fn shutdown_upgrade(
    strategy: UpgradeType,
    existing: Option<&StatefulSet>,
    desired_image: &str,
) -> bool {
    strategy == UpgradeType::Shutdown
        && existing.is_some_and(|sts| {
            sts.spec.replicas.unwrap_or(1) > 0
                && server_image(sts).is_some_and(|image| image != desired_image)
        })
}

/// Keeps the first `pods` pods of `sts` on their current template while a new one is applied
/// (the rolling update's partition: only ordinals at or above it are updated).
pub fn hold_template(sts: &mut StatefulSet, pods: i32) {
    sts.spec.update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some("RollingUpdate".to_string()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(pods),
            ..RollingUpdateStatefulSetStrategy::default()
        }),
    });
}

/// The image of the server container of `sts`'s pod template.
fn server_image(sts: &StatefulSet) -> Option<&str> {
    sts.spec
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == CONTAINER_NAME)?
        .image
        .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(replicas: i32, image: &str, annotations: serde_json::Value) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "demo", "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {}, "template": {"spec": {"containers": [
                {"name": "server-pem", "image": "other"},
                {"name": CONTAINER_NAME, "image": image},
            ]}}},
        }))
        .expect("a StatefulSet")
    }

    #[test]
    fn a_cluster_keeps_the_version_it_runs_unless_the_cr_names_one() {
        let recorded = sts(3, "img:16.0.7", json!({VERSION_ANNOTATION: "16.0.7"}));
        let running = running_version(Some(&recorded), Some("16.0.5"));
        assert_eq!(running.as_deref(), Some("16.0.7"));
        // No spec.version: the running one, not the operator's default (None).
        assert_eq!(pinned(None, running.as_deref()).as_deref(), Some("16.0.7"));
        assert_eq!(
            pinned(Some(" "), running.as_deref()).as_deref(),
            Some("16.0.7")
        );
        assert_eq!(
            pinned(Some("16.1.0"), running.as_deref()).as_deref(),
            Some("16.1.0")
        );
        // An earlier release's StatefulSet: the status says what it applied.
        let legacy = sts(3, "img:16.0.5", json!({}));
        assert_eq!(
            running_version(Some(&legacy), Some("16.0.5")).as_deref(),
            Some("16.0.5")
        );
        // A new cluster: the operator's default.
        assert_eq!(running_version(None, Some("16.0.5")), None);
        assert_eq!(pinned(None, None), None);
    }

    #[test]
    fn a_version_below_the_running_one_is_refused_unless_allowed() {
        let refused = downgrade("16.0.6", "16.0.7", false).expect("refused");
        assert!(refused.contains("allowDowngrade"), "{refused}");
        assert!(downgrade("16.0.6", "16.0.7", true).is_none());
        assert!(downgrade("15.9", "16.0.7", false).is_some());
        assert!(downgrade("16.0.7", "16.0.7", false).is_none());
        assert!(downgrade("16.0.7.Final", "16.0.7", false).is_none());
        assert!(downgrade("16.1", "16.0.7", false).is_none());
        assert!(downgrade("16.0.10", "16.0.9", false).is_none());
        // Not a version (refused elsewhere): no opinion here.
        assert!(downgrade("latest", "16.0.7", false).is_none());
    }

    #[test]
    fn only_a_running_cluster_with_another_image_and_the_shutdown_strategy_upgrades_by_shutdown() {
        let running = sts(3, "img:16.0.7", json!({}));
        assert!(shutdown_upgrade(
            UpgradeType::Shutdown,
            Some(&running),
            "img:16.1.0"
        ));
        assert!(!shutdown_upgrade(
            UpgradeType::Shutdown,
            Some(&running),
            "img:16.0.7"
        ));
        assert!(!shutdown_upgrade(
            UpgradeType::Rolling,
            Some(&running),
            "img:16.1.0"
        ));
        let stopped = sts(0, "img:16.0.7", json!({}));
        assert!(!shutdown_upgrade(
            UpgradeType::Shutdown,
            Some(&stopped),
            "img:16.1.0"
        ));
        assert!(!shutdown_upgrade(UpgradeType::Shutdown, None, "img:16.1.0"));
    }

    #[test]
    fn a_reconcile_gets_the_version_kept_the_refusal_and_the_strategy_at_once() {
        let images = ServerImages::single("16.0.7", "img:16.0.7");
        let cluster = |spec: serde_json::Value| -> Infinispan {
            serde_json::from_value(json!({
                "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
                "metadata": {"name": "demo", "namespace": "ns"}, "spec": spec,
            }))
            .expect("a CR")
        };
        let running = sts(2, "img:16.0.5", json!({VERSION_ANNOTATION: "16.0.5"}));
        // No version: the running one is kept.
        let kept = decide(&cluster(json!({})), Some(&running), &images);
        assert_eq!(kept.version.as_deref(), Some("16.0.5"));
        assert_eq!((kept.downgrade, kept.shutdown_upgrade), (None, false));
        // A newer one by Shutdown: an upgrade by a graceful stop.
        let up = decide(
            &cluster(json!({"version": "16.0.7", "upgrades": {"type": "Shutdown"}})),
            Some(&running),
            &images,
        );
        assert!(up.shutdown_upgrade && up.downgrade.is_none());
        // An older one: refused.
        let down = decide(
            &cluster(json!({"version": "16.0.1"})),
            Some(&running),
            &images,
        );
        assert!(down.downgrade.is_some());
    }
}
