//! Every request one user makes to the API server, reads included, counted by the API server
//! itself: API Priority and Fairness puts each request into the first FlowSchema that matches
//! and counts it in `apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}`. The
//! bench adds FlowSchemas that match only the operator's ServiceAccount, one per group of verbs,
//! all on the priority level the built-in `service-accounts` schema would give it (so the
//! operator is treated as before), and reads the counters from the API server's `/metrics`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The priority level of the built-in `service-accounts` FlowSchema.
pub const PRIORITY_LEVEL: &str = "workload-low";

/// Groups of requests, in matching order (a request counts in the first that matches).
pub const GROUPS: &[(&str, &[&str])] = &[
    ("lease", &["*"]),
    ("list", &["list"]),
    ("watch", &["watch"]),
    ("get", &["get"]),
    (
        "write",
        &["create", "update", "patch", "delete", "deletecollection"],
    ),
    ("other", &["*"]),
];

/// Name of the FlowSchema of `group` for a run labelled `run`.
pub fn schema_name(run: &str, group: &str) -> String {
    format!("bench-{run}-{group}")
}

/// The FlowSchemas (as JSON objects) for the ServiceAccount `namespace/account`; precedences
/// start at `precedence` (below the built-in `service-accounts`, 9000).
pub fn flow_schemas(run: &str, namespace: &str, account: &str, precedence: u32) -> Vec<Value> {
    let subject = json!({
        "kind": "ServiceAccount",
        "serviceAccount": { "name": account, "namespace": namespace },
    });
    GROUPS
        .iter()
        .enumerate()
        .map(|(index, (group, verbs))| {
            let resource_rule = if *group == "lease" {
                json!({
                    "verbs": ["*"], "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"], "namespaces": ["*"],
                })
            } else {
                json!({
                    "verbs": verbs, "apiGroups": ["*"], "resources": ["*"],
                    "namespaces": ["*"], "clusterScope": true,
                })
            };
            let mut rule = json!({ "subjects": [subject], "resourceRules": [resource_rule] });
            if *group == "other" {
                rule["nonResourceRules"] = json!([{ "verbs": ["*"], "nonResourceURLs": ["*"] }]);
            }
            json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {
                    "name": schema_name(run, group),
                    "labels": { "infinispan-operators-bench": "true" },
                },
                "spec": {
                    "priorityLevelConfiguration": { "name": PRIORITY_LEVEL },
                    "matchingPrecedence": precedence + index as u32,
                    "distinguisherMethod": { "type": "ByUser" },
                    "rules": [rule],
                },
            })
        })
        .collect()
}

/// `group` -> requests dispatched so far, from the API server's metrics text, for the
/// FlowSchemas of `run` (summed over priority levels).
pub fn dispatched(metrics: &str, run: &str) -> BTreeMap<String, u64> {
    let prefix = format!("bench-{run}-");
    let mut counts = BTreeMap::new();
    for line in metrics.lines() {
        let Some(labels) = line.strip_prefix("apiserver_flowcontrol_dispatched_requests_total{")
        else {
            continue;
        };
        let Some((labels, value)) = labels.rsplit_once("} ") else {
            continue;
        };
        let schema = labels.split(',').find_map(|label| {
            label
                .strip_prefix("flow_schema=\"")
                .and_then(|v| v.strip_suffix('"'))
        });
        let (Some(schema), Ok(value)) = (schema, value.trim().parse::<f64>()) else {
            continue;
        };
        if let Some(group) = schema.strip_prefix(&prefix) {
            *counts.entry(group.to_string()).or_default() += value as u64;
        }
    }
    counts
}

/// `after - before`, per group (groups missing before count from zero).
pub fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(group, n)| {
            (
                group.clone(),
                n.saturating_sub(before.get(group).copied().unwrap_or_default()),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_schema_per_group_for_the_account_only() {
        let schemas = flow_schemas("r1", "bench-ns", "resources-operator-demo", 8900);
        assert_eq!(schemas.len(), GROUPS.len());
        assert_eq!(schemas[0]["metadata"]["name"], "bench-r1-lease");
        assert_eq!(schemas[0]["spec"]["matchingPrecedence"], 8900);
        assert_eq!(
            schemas[1]["spec"]["rules"][0]["resourceRules"][0]["verbs"][0],
            "list"
        );
        for schema in &schemas {
            let subject = &schema["spec"]["rules"][0]["subjects"][0];
            assert_eq!(subject["serviceAccount"]["name"], "resources-operator-demo");
            assert_eq!(subject["serviceAccount"]["namespace"], "bench-ns");
            assert_eq!(
                schema["spec"]["priorityLevelConfiguration"]["name"],
                PRIORITY_LEVEL
            );
        }
        assert!(schemas[5]["spec"]["rules"][0]["nonResourceRules"].is_array());
    }

    #[test]
    fn reads_the_dispatched_counters_of_the_run() {
        let metrics = "\
# HELP apiserver_flowcontrol_dispatched_requests_total x
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"bench-r1-list\",priority_level=\"workload-low\"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"bench-r1-write\",priority_level=\"workload-low\"} 2.0
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"bench-r2-write\",priority_level=\"workload-low\"} 9
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 7
";
        let counts = dispatched(metrics, "r1");
        assert_eq!(counts.get("list"), Some(&3));
        assert_eq!(counts.get("write"), Some(&2));
        assert_eq!(counts.len(), 2);
        let later = BTreeMap::from([("list".to_string(), 5), ("get".to_string(), 1)]);
        let d = delta(&counts, &later);
        assert_eq!(d.get("list"), Some(&2));
        assert_eq!(d.get("get"), Some(&1));
    }
}
