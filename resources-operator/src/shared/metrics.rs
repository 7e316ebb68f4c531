//! The shared operator's `/metrics`: every member's metrics (each member has the registry a
//! per-cluster operator has, [`Metrics`]), each sample labelled `cluster`, plus the operator's
//! own (`infinispan_resources_operator_shared_*`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{LabelPair, MetricFamily};
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use crate::metrics::{Metrics, PREFIX};

/// The label naming a sample's member cluster.
pub const CLUSTER_LABEL: &str = "cluster";

/// The members' registries, gathered as one collector (clones share them).
#[derive(Clone, Debug, Default)]
pub struct MemberMetrics {
    members: Arc<Mutex<BTreeMap<String, Metrics>>>,
}

impl MemberMetrics {
    /// The metrics of member `cluster`: the ones it had (a member that restarts keeps counting),
    /// else new ones, served from now on.
    pub fn member(&self, cluster: &str) -> Result<Metrics, prometheus::Error> {
        let mut members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(metrics) = members.get(cluster) {
            return Ok(metrics.clone());
        }
        let metrics = Metrics::new()?;
        members.insert(cluster.to_string(), metrics.clone());
        Ok(metrics)
    }

    /// Member `cluster` left: its samples are no longer served.
    pub fn remove(&self, cluster: &str) {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster);
    }

    /// The work of every member (see [`Metrics::activity`]).
    pub fn activity(&self) -> u64 {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(Metrics::activity)
            .sum()
    }
}

impl Collector for MemberMetrics {
    /// Members come and go: no fixed descriptors (the registry accepts one such collector).
    fn desc(&self) -> Vec<&Desc> {
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let registries: Vec<(String, Registry)> = self
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(cluster, metrics)| (cluster.clone(), metrics.registry.clone()))
            .collect();
        labelled(
            registries
                .iter()
                .map(|(cluster, registry)| (cluster.as_str(), registry.gather())),
        )
    }
}

/// The families of every member, one family per name, each sample with its member's `cluster`
/// label (pure).
pub fn labelled<'a>(
    members: impl IntoIterator<Item = (&'a str, Vec<MetricFamily>)>,
) -> Vec<MetricFamily> {
    let mut by_name: BTreeMap<String, MetricFamily> = BTreeMap::new();
    for (cluster, families) in members {
        for mut family in families {
            let mut samples = family.take_metric();
            for sample in &mut samples {
                let mut labels = sample.take_label();
                let mut label = LabelPair::default();
                label.set_name(CLUSTER_LABEL.to_string());
                label.set_value(cluster.to_string());
                labels.insert(0, label);
                sample.set_label(labels);
            }
            let merged = by_name
                .entry(family.name().to_string())
                .or_insert_with(|| family.clone());
            merged.mut_metric().extend(samples);
        }
    }
    by_name.into_values().collect()
}

/// The shared operator's own metrics.
#[derive(Clone, Debug)]
pub struct SharedMetrics {
    /// Clusters the ConfigMap lists now.
    pub members: IntGauge,
    /// Syncs of a member started, by cluster and why (`joined`, `changed`, `retry`).
    pub member_starts: IntCounterVec,
    /// Member syncs that stopped with an error, by cluster.
    pub member_failures: IntCounterVec,
}

impl SharedMetrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let members = IntGauge::with_opts(Opts::new(
            format!("{PREFIX}_shared_members"),
            "Clusters the shared operator's ConfigMap lists",
        ))?;
        let member_starts = IntCounterVec::new(
            Opts::new(
                format!("{PREFIX}_shared_member_starts_total"),
                "Syncs of a member cluster started, by cluster and reason (joined, changed, retry)",
            ),
            &[CLUSTER_LABEL, "reason"],
        )?;
        let member_failures = IntCounterVec::new(
            Opts::new(
                format!("{PREFIX}_shared_member_failures_total"),
                "Syncs of a member cluster that stopped with an error (retried with backoff)",
            ),
            &[CLUSTER_LABEL],
        )?;
        registry.register(Box::new(members.clone()))?;
        registry.register(Box::new(member_starts.clone()))?;
        registry.register(Box::new(member_failures.clone()))?;
        Ok(Self {
            members,
            member_starts,
            member_failures,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_members_samples_are_served_labelled_with_their_cluster() -> Result<(), anyhow::Error> {
        let shared = MemberMetrics::default();
        let registry = Registry::new();
        registry.register(Box::new(shared.clone()))?;
        let a = shared.member("a")?;
        let b = shared.member("b")?;
        a.reconciles.with_label_values(&["Cache", "wrote"]).inc();
        b.reconciles
            .with_label_values(&["Cache", "wrote"])
            .inc_by(2);
        b.server_objects.with_label_values(&["Cache"]).set(250);
        let text = operator_runtime::endpoint::render(&registry);
        assert!(
            text.contains(
                r#"infinispan_resources_operator_reconciles_total{cluster="a",kind="Cache",result="wrote"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"infinispan_resources_operator_reconciles_total{cluster="b",kind="Cache",result="wrote"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"infinispan_resources_operator_server_objects{cluster="b",kind="Cache"} 250"#
            ),
            "{text}"
        );
        // One HELP and TYPE per family, whatever the number of members.
        assert_eq!(
            text.matches("# TYPE infinispan_resources_operator_reconciles_total counter")
                .count(),
            1,
            "{text}"
        );
        // A member that comes back keeps its counts; one that left is no longer served.
        assert_eq!(
            shared
                .member("a")?
                .reconciles
                .with_label_values(&["Cache", "wrote"])
                .get(),
            1
        );
        shared.remove("b");
        let text = operator_runtime::endpoint::render(&registry);
        assert!(!text.contains(r#"cluster="b""#), "{text}");
        assert!(text.contains(r#"cluster="a""#), "{text}");
        assert_eq!(shared.activity(), 1);
        Ok(())
    }
}
