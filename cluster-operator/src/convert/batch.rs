//! `Batch` v2alpha1 of infinispan-operator: the same kind here (a CLI script run once against
//! a cluster by a Job of the cluster operator, `crate::batch`). `cluster`, `config` and
//! `configMap` carry over; the ConfigMap must allow the cluster; `container` (the Job's
//! resources) does not.

use common_crds::{Batch, BatchSpec};

use super::fields::{FieldError, Fields};
use super::metadata;
use super::report::Log;

/// Converts the object of `root`.
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<Batch, FieldError> {
    metadata::take_type(root);
    let metadata = metadata::convert(root, log, &[])?;
    let name = metadata.name.clone().unwrap_or_default();
    let Some(mut fields) = root.take_object("spec")? else {
        return Err(FieldError::new("spec", "missing"));
    };
    let cluster: String = fields
        .take_as::<String>("cluster")?
        .filter(|c| !c.is_empty())
        .ok_or_else(|| FieldError::new("spec.cluster", "missing"))?;
    log.mapped("spec.cluster", "");
    let config = fields
        .take_as::<String>("config")?
        .filter(|c| !c.trim().is_empty());
    let config_map = fields
        .take_as::<String>("configMap")?
        .filter(|c| !c.is_empty());
    match (&config, &config_map) {
        (Some(_), None) => log.mapped(
            "spec.config",
            "run by the CLI of the cluster's server image, connected as the operators' user; a command that fails fails the Batch with the CLI's message",
        ),
        (None, Some(config_map)) => log.mapped(
            "spec.configMap",
            &format!(
                "its key batch is the script, its other keys files beside it; the cluster uses it only once it allows the cluster: kubectl annotate configmap {config_map} {}={cluster}",
                common_crds::labels::ALLOW_CLUSTERS_ANNOTATION
            ),
        ),
        _ => {
            return Err(FieldError::new(
                "spec",
                "exactly one of config and configMap is needed",
            ));
        }
    }
    log.drop_field(
        &mut fields,
        "container",
        "the Job's resources are fixed here (100m CPU, 256Mi-384Mi memory)",
    );
    log.unknown(fields);
    metadata::omit_status(root, log);
    let mut cr = Batch::new(
        &name,
        BatchSpec {
            cluster,
            config,
            config_map,
        },
    );
    cr.metadata = metadata;
    Ok(cr)
}

#[cfg(test)]
mod tests {
    use super::super::Outcome;
    use super::super::tests::{assert_field, only_report};

    #[test]
    fn a_batch_keeps_its_script_and_cluster() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Batch\nmetadata: {name: b}\nspec:\n  cluster: c\n  config: |\n    create counter --type=weak hits\n  container: {cpu: 500m}\n",
        );
        assert_eq!(objects.len(), 1);
        let value = objects[0].to_value().expect("JSON");
        assert_eq!(value["kind"], "Batch");
        assert_eq!(value["spec"]["cluster"], "c");
        assert_eq!(value["spec"]["config"], "create counter --type=weak hits\n");
        assert_field(
            &report,
            "spec.config",
            Outcome::Mapped,
            Some("spec.config"),
            "CLI",
        );
        assert_field(
            &report,
            "spec.container",
            Outcome::Dropped,
            None,
            "resources are fixed",
        );
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Batch\nmetadata: {name: b}\nspec: {cluster: c, configMap: script}\n",
        );
        assert_eq!(
            objects[0].to_value().expect("JSON")["spec"]["configMap"],
            "script"
        );
        assert_field(
            &report,
            "spec.configMap",
            Outcome::Mapped,
            Some("spec.configMap"),
            "kubectl annotate configmap script infinispan.org/allow-clusters=c",
        );
        assert!(!report.dropped_anything());
    }
}
