//! `Cache` v2alpha1 of infinispan-operator to this project's `Cache` v2alpha1
//! (docs/migration.md, "Cache"): the cluster becomes the label `infinispan.org/cluster`.

use common_crds::common::{ResourceSpecCommon, UpdateStrategy, Updates};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Cache, CacheSpec};

use super::fields::{FieldError, Fields};
use super::metadata;
use super::report::{Log, Outcome};

/// Annotation infinispan-operator's config listener put on the Cache CRs it made.
const LISTENER_ANNOTATION: &str = "infinispan.org/listener-generation";

/// Converts the object of `root`. A Cache CR the other operator's config listener made is
/// reported omitted, and not written (this operator's resources operator makes its own).
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<Cache, FieldError> {
    metadata::take_type(root);
    let mut metadata = metadata::convert(root, log, &[])?;
    let from_listener = metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(LISTENER_ANNOTATION));
    let name = metadata.name.clone().unwrap_or_default();
    let Some(mut fields) = root.take_object("spec")? else {
        return Err(FieldError::new("spec", "missing"));
    };
    let cluster: Option<String> = fields.take_as("clusterName")?;
    let Some(cluster) = cluster.filter(|c| !c.is_empty()) else {
        return Err(FieldError::new("spec.clusterName", "missing"));
    };
    let mut labels = metadata.labels.take().unwrap_or_default();
    let label_note = match labels.insert(CLUSTER_LABEL.to_string(), cluster.clone()) {
        Some(old) if old != cluster => {
            format!("the label {CLUSTER_LABEL} was {old:?}: replaced by spec.clusterName")
        }
        _ => "required here; it cannot be changed or removed once set".to_string(),
    };
    log.changed(
        "spec.clusterName",
        &format!("metadata.labels.{CLUSTER_LABEL}"),
        &label_note,
    );
    metadata.labels = Some(labels);
    let mut spec = CacheSpec {
        common: ResourceSpecCommon::default(),
        template: None,
        template_name: None,
        updates: None,
    };
    if let Some(server_name) = log.take_text(&mut fields, "name")? {
        let note = if server_name == name {
            "equals metadata.name, it could go"
        } else {
            "immutable once set"
        };
        log.mapped("spec.name", note);
        spec.common.name = Some(server_name);
    }
    if let Some(template) = log.take_text(&mut fields, "template")? {
        log.mapped(
            "spec.template",
            "kept in its format (XML, JSON or YAML) when the server side changes",
        );
        spec.template = Some(template);
    }
    if let Some(template_name) = log.take_text(&mut fields, "templateName")? {
        log.mapped(
                "spec.templateName",
                "a built-in template or a Template CR's server name; the cache waits (DependencyMissing) until the server has it",
            );
        spec.template_name = Some(template_name);
    }
    if spec.template.is_some() == spec.template_name.is_some() {
        return Err(FieldError::new(
            "spec",
            "exactly one of spec.template and spec.templateName must be set",
        ));
    }
    if let Some(mut updates) = fields.take_object("updates")? {
        if let Some(strategy) = updates.take_as::<UpdateStrategy>("strategy")? {
            log.mapped("spec.updates.strategy", "");
            spec.updates = Some(Updates { strategy });
        }
        log.unknown(updates);
    }
    log.drop_field(
        &mut fields,
        "adminAuth",
        "not supported: the operators' own credentials are used",
    );
    log.unknown(fields);
    metadata::omit_status(root, log);
    if from_listener {
        log.object = Some((
            Outcome::Omitted,
            format!(
                "made by the other operator's config listener (annotation {LISTENER_ANNOTATION}): not written; this operator's resources operator mirrors the server's caches itself"
            ),
        ));
    } else {
        log.note(
            "deleting the Cache CR deletes the cache on the server (spec.deletionPolicy: Retain keeps it)",
        );
    }
    let mut cr = Cache::new(&name, spec);
    cr.metadata = metadata;
    Ok(cr)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_field, only_report};
    use super::super::{Converted, Outcome};
    use super::*;

    fn cache(spec: &str, metadata: &str) -> (Option<Cache>, super::super::ObjectReport) {
        let (objects, report) = only_report(&format!(
            "apiVersion: infinispan.org/v2alpha1\nkind: Cache\nmetadata: {{name: orders, namespace: ns{metadata}}}\nspec: {spec}\n"
        ));
        let cr = objects.into_iter().next().map(|object| match object {
            Converted::Cache(cr) => *cr,
            other => panic!("not a Cache: {other:?}"),
        });
        (cr, report)
    }

    #[test]
    fn the_cluster_becomes_the_label_and_the_rest_is_kept() {
        let (cr, report) = cache(
            "{clusterName: shop, name: Orders, template: '<local-cache/>', updates: {strategy: recreate}}",
            ", labels: {team: a}",
        );
        let Some(cr) = cr else { panic!("written") };
        assert_field(
            &report,
            "spec.clusterName",
            Outcome::Changed,
            Some("metadata.labels.infinispan.org/cluster"),
            "required here",
        );
        assert_field(
            &report,
            "spec.name",
            Outcome::Mapped,
            Some("spec.name"),
            "immutable",
        );
        assert_field(
            &report,
            "spec.template",
            Outcome::Mapped,
            Some("spec.template"),
            "",
        );
        assert_field(
            &report,
            "spec.updates.strategy",
            Outcome::Mapped,
            Some("spec.updates.strategy"),
            "",
        );
        let labels = cr.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(CLUSTER_LABEL).map(String::as_str), Some("shop"));
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(cr.spec.common.name.as_deref(), Some("Orders"));
        assert_eq!(cr.spec.update_strategy(), UpdateStrategy::Recreate);
        assert!(!report.dropped_anything());
    }

    #[test]
    fn admin_auth_is_dropped_and_a_template_name_kept() {
        let (cr, report) = cache(
            "{clusterName: shop, templateName: org.infinispan.DIST_SYNC, adminAuth: {secretName: s}}",
            "",
        );
        assert_eq!(
            cr.and_then(|c| c.spec.template_name).as_deref(),
            Some("org.infinispan.DIST_SYNC")
        );
        assert_field(
            &report,
            "spec.adminAuth",
            Outcome::Dropped,
            None,
            "the operators' own credentials",
        );
        assert_field(
            &report,
            "spec.templateName",
            Outcome::Mapped,
            Some("spec.templateName"),
            "",
        );
    }

    #[test]
    fn listener_made_caches_are_not_written() {
        let (cr, report) = cache(
            "{clusterName: shop, template: '<local-cache/>'}",
            ", annotations: {infinispan.org/listener-generation: '1'}",
        );
        assert_eq!(cr, None);
        assert_eq!(report.outcome, Outcome::Omitted);
        assert!(!report.dropped_anything());
    }

    #[test]
    fn a_cache_needs_exactly_one_of_template_and_template_name() {
        for spec in [
            "{clusterName: shop}",
            "{clusterName: shop, template: a, templateName: b}",
        ] {
            let text = format!(
                "apiVersion: infinispan.org/v2alpha1\nkind: Cache\nmetadata: {{name: c}}\nspec: {spec}\n"
            );
            let documents =
                super::super::parse_documents("t", &text).unwrap_or_else(|e| panic!("{e}"));
            let Err(error) = super::super::convert_documents(documents) else {
                panic!("{spec} converted");
            };
            assert!(
                error
                    .to_string()
                    .contains("exactly one of spec.template and spec.templateName"),
                "{error}"
            );
        }
    }
}
