//! `Restore` v2alpha1 of infinispan-operator to this project's `Restore` v2alpha1
//! (docs/migration.md, "Backup and Restore"): it restores the archive the other operator's Backup
//! left on its PersistentVolumeClaim.

use common_crds::restore::RestoreSource;
use common_crds::{Restore, RestoreSpec};

use super::backup::CONTAINER_REASON;
use super::fields::{FieldError, Fields};
use super::metadata;
use super::report::Log;
use super::selected;

/// Converts the object of `root`.
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<Restore, FieldError> {
    metadata::take_type(root);
    let metadata = metadata::convert(root, log, &[])?;
    let name = metadata.name.clone().unwrap_or_default();
    let Some(mut fields) = root.take_object("spec")? else {
        return Err(FieldError::new("spec", "missing"));
    };
    let mut required = |key: &str| -> Result<String, FieldError> {
        let path = fields.path(key);
        let value: Option<String> = fields.take_as(key)?;
        value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| FieldError::new(path, "missing"))
    };
    let cluster = required("cluster")?;
    let backup = required("backup")?;
    log.mapped("spec.cluster", "");
    log.changed(
        "spec.backup",
        "spec.source.persistentVolumeClaim",
        "the archive the other operator's Backup left on its PersistentVolumeClaim of that name (<name>/<name>.zip); to restore a Backup of this operator instead, write spec.backup",
    );
    let resources = selected::convert(&mut fields, log)?;
    log.drop_field(&mut fields, "container", CONTAINER_REASON);
    log.unknown(fields);
    metadata::omit_status(root, log);
    let mut cr = Restore::new(
        &name,
        RestoreSpec {
            cluster,
            backup: None,
            source: Some(RestoreSource {
                persistent_volume_claim: backup,
                path: None,
            }),
            resources,
        },
    );
    cr.metadata = metadata;
    Ok(cr)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_field, only_report};
    use super::super::{Converted, Outcome};

    #[test]
    fn a_restore_keeps_its_cluster_and_backup_and_loses_its_pod() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Restore\nmetadata: {name: r, namespace: ns}\nspec: {cluster: c, backup: b, container: {cpu: '1'}, resources: {scripts: [s]}}\nstatus: {phase: Succeeded}\n",
        );
        let Some(Converted::Restore(restore)) = objects.first() else {
            panic!("a Restore");
        };
        let source = restore.spec.source.clone().expect("source");
        assert_eq!(
            (
                restore.spec.cluster.as_str(),
                source.persistent_volume_claim.as_str()
            ),
            ("c", "b")
        );
        assert_eq!(source.archive_path(), "b/b.zip");
        assert!(restore.spec.backup.is_none());
        let resources = restore.spec.resources.clone().unwrap_or_default();
        assert_eq!(resources.tasks, Some(vec!["s".to_string()]));
        assert_eq!(resources.caches, Some(vec![]));
        assert_field(
            &report,
            "spec.backup",
            Outcome::Changed,
            Some("spec.source.persistentVolumeClaim"),
            "left on its PersistentVolumeClaim",
        );
        assert_field(
            &report,
            "spec.resources.scripts",
            Outcome::Changed,
            Some("spec.resources.tasks"),
            "renamed",
        );
        assert_field(&report, "spec.container", Outcome::Dropped, None, "no pod");
        assert_field(&report, "status", Outcome::Omitted, None, "");
        assert_eq!(restore.status, None);
    }
}
