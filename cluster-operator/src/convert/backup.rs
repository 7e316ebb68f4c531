//! `Backup` v2alpha1 of infinispan-operator to this project's `Backup` v2alpha1
//! (docs/migration.md, "Backup and Restore"): the same PersistentVolumeClaim (`spec.volume`), no
//! pod of its own.

use common_crds::backup::BackupVolume;
use common_crds::{Backup, BackupSpec};

use super::fields::{FieldError, Fields};
use super::metadata;
use super::report::Log;
use super::selected;

/// Reason for dropping `spec.container` of a Backup or Restore.
pub(super) const CONTAINER_REASON: &str =
    "no pod: the cluster operator calls the server's REST API";

/// Converts the object of `root`.
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<Backup, FieldError> {
    metadata::take_type(root);
    let metadata = metadata::convert(root, log, &[])?;
    let name = metadata.name.clone().unwrap_or_default();
    let Some(mut fields) = root.take_object("spec")? else {
        return Err(FieldError::new("spec", "missing"));
    };
    let cluster: Option<String> = fields.take_as("cluster")?;
    let Some(cluster) = cluster.filter(|c| !c.is_empty()) else {
        return Err(FieldError::new("spec.cluster", "missing"));
    };
    log.mapped("spec.cluster", "");
    let volume: Option<BackupVolume> = fields.take_as("volume")?;
    if volume.is_some() {
        log.mapped(
            "spec.volume",
            "the archive's PersistentVolumeClaim, named like the Backup, with the same layout",
        );
    }
    let resources = selected::convert(&mut fields, log)?;
    log.drop_field(&mut fields, "container", CONTAINER_REASON);
    log.unknown(fields);
    metadata::omit_status(root, log);
    log.note("creating it takes a new backup of the cluster at once, onto a PersistentVolumeClaim of the Backup's name: one the other operator left under that name must be deleted first (a Restore can read it with spec.source before)");
    let mut cr = Backup::new(
        &name,
        BackupSpec {
            cluster,
            resources,
            volume,
            ..BackupSpec::default()
        },
    );
    cr.metadata = metadata;
    Ok(cr)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_field, convert_text, only_report};
    use super::super::{Converted, Outcome};

    #[test]
    fn lists_keep_what_the_other_operator_took() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Backup\nmetadata: {name: b}\nspec:\n  cluster: c\n  volume: {storage: 1Gi}\n  container: {memory: 1Gi}\n  resources: {caches: [a], protoSchemas: ['*'], templates: []}\n",
        );
        let Some(Converted::Backup(backup)) = objects.first() else {
            panic!("a Backup");
        };
        let resources = backup.spec.resources.clone().unwrap_or_default();
        assert_eq!(resources.caches, Some(vec!["a".to_string()]));
        assert_eq!(resources.schemas, Some(vec!["*".to_string()]));
        assert_eq!(resources.templates, Some(vec![]));
        assert_eq!(resources.counters, Some(vec![]));
        assert_eq!(resources.tasks, Some(vec![]));
        assert_field(
            &report,
            "spec.cluster",
            Outcome::Mapped,
            Some("spec.cluster"),
            "",
        );
        assert_field(
            &report,
            "spec.resources.protoSchemas",
            Outcome::Changed,
            Some("spec.resources.schemas"),
            "renamed",
        );
        assert_field(
            &report,
            "spec.resources.counters",
            Outcome::Changed,
            Some("spec.resources.counters"),
            "took none of them",
        );
        assert_field(
            &report,
            "spec.volume",
            Outcome::Mapped,
            Some("spec.volume"),
            "PersistentVolumeClaim",
        );
        assert_eq!(
            backup.spec.volume.clone().and_then(|v| v.storage),
            Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                "1Gi".into()
            ))
        );
        assert_field(&report, "spec.container", Outcome::Dropped, None, "no pod");
    }

    #[test]
    fn nothing_listed_means_everything() {
        for resources in ["{}", "{caches: [], tasks: []}"] {
            let (objects, report) = only_report(&format!(
                "apiVersion: infinispan.org/v2alpha1\nkind: Backup\nmetadata: {{name: b}}\nspec: {{cluster: c, resources: {resources}}}\n"
            ));
            let Some(Converted::Backup(backup)) = objects.first() else {
                panic!("a Backup");
            };
            assert_eq!(backup.spec.resources, None);
            assert_field(
                &report,
                "spec.resources",
                Outcome::Changed,
                None,
                "took everything",
            );
            assert!(!report.dropped_anything());
        }
    }

    #[test]
    fn deprecated_names_replace_the_new_ones_as_the_webhook_did() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Backup\nmetadata: {name: b}\nspec: {cluster: c, resources: {templates: [t], cacheConfigs: [old]}}\n",
        );
        let Some(Converted::Backup(backup)) = objects.first() else {
            panic!("a Backup");
        };
        let resources = backup.spec.resources.clone().unwrap_or_default();
        assert_eq!(resources.templates, Some(vec!["old".to_string()]));
        assert_field(
            &report,
            "spec.resources.cacheConfigs",
            Outcome::Changed,
            Some("spec.resources.templates"),
            "renamed",
        );
        assert_field(
            &report,
            "spec.resources.templates",
            Outcome::Dropped,
            None,
            "replaced by spec.resources.cacheConfigs",
        );
    }

    #[test]
    fn a_restore_into_another_cluster_is_accepted_by_it() {
        let conversion = convert_text(
            "t",
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {name: new, namespace: ns}\nspec: {replicas: 1, version: 16.0.7}\n---\napiVersion: infinispan.org/v2alpha1\nkind: Backup\nmetadata: {name: b, namespace: ns}\nspec: {cluster: old}\n---\napiVersion: infinispan.org/v2alpha1\nkind: Restore\nmetadata: {name: r, namespace: ns}\nspec: {cluster: new, backup: b}\n",
        );
        let Some(Converted::Infinispan(cluster)) = conversion.objects.first() else {
            panic!("an Infinispan");
        };
        assert_eq!(cluster.spec.accept_restores_from, ["old"]);
        assert_field(
            &conversion.report.objects[0],
            "spec.acceptRestoresFrom",
            Outcome::Changed,
            Some("spec.acceptRestoresFrom"),
            "added old",
        );
        assert!(
            conversion.report.objects[2].notes[0]
                .contains("old is added to new's spec.acceptRestoresFrom")
        );
        assert!(!conversion.report.dropped_anything());
        let Some(Converted::Restore(restore)) = conversion.objects.get(2) else {
            panic!("a Restore");
        };
        assert_eq!(restore.spec.backup.as_deref(), Some("b"));
        assert!(restore.spec.source.is_none());
        assert_field(
            &conversion.report.objects[2],
            "spec.backup",
            Outcome::Mapped,
            Some("spec.backup"),
            "converted too",
        );
    }
}
