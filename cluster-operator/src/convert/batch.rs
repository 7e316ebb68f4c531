//! `Batch` v2alpha1 of infinispan-operator: no equivalent here (docs/migration.md, "Batch"). The
//! object is dropped; the report says what its commands become.

use super::fields::{FieldError, Fields};
use super::metadata;
use super::report::{Log, Outcome};

/// Why a Batch is dropped.
pub const REASON: &str = "not supported: declare caches, templates, counters, schemas and tasks as CRs (Cache, Template, Counter, Schema, Task); run other CLI commands yourself (docs/migration.md, \"Batch\")";

/// Reads the object of `root` and reports it dropped.
pub fn convert(root: &mut Fields, log: &mut Log) -> Result<(), FieldError> {
    metadata::take_type(root);
    metadata::convert(root, log, &[])?;
    if let Some(mut fields) = root.take_object("spec")? {
        let reason = "the Batch is not converted";
        log.drop_field(&mut fields, "cluster", reason);
        if let Some(script) = fields.take_as::<String>("config")? {
            let commands = commands(&script);
            log.dropped("spec.config", &serde_json::json!(script), reason);
            if !commands.is_empty() {
                log.note(format!("its commands: {}", commands.join("; ")));
            }
        }
        if let Some(config_map) = fields.take_as::<String>("configMap")? {
            log.dropped(
                "spec.configMap",
                &serde_json::json!(config_map),
                &format!("the Batch is not converted; the script in ConfigMap {config_map} (key batch) is not read"),
            );
        }
        log.drop_field(&mut fields, "container", reason);
        log.unknown(fields);
    }
    metadata::omit_status(root, log);
    log.note("what a batch did maps to: create cache -> a Cache CR (spec.template is the file's content, or spec.templateName); a template -> a Template CR; create counter -> a Counter CR; a Protobuf schema -> a Schema CR; a script task -> a Task CR; anything else (put, site, administrative commands): the Infinispan CLI against the cluster's Service, e.g. from a Job");
    log.object = Some((Outcome::Dropped, REASON.to_string()));
    Ok(())
}

/// The commands of a batch script, one per non-empty, non-comment line.
fn commands(script: &str) -> Vec<String> {
    script
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Outcome;
    use super::super::tests::{assert_field, only_report};

    #[test]
    fn a_batch_is_dropped_with_its_commands_listed() {
        let (objects, report) = only_report(
            "apiVersion: infinispan.org/v2alpha1\nkind: Batch\nmetadata: {name: b}\nspec:\n  cluster: c\n  config: |\n    # setup\n    create counter --type=weak hits\n    put --cache=a k v\n",
        );
        assert!(objects.is_empty());
        assert_eq!(report.outcome, Outcome::Dropped);
        assert_eq!(report.note, super::REASON);
        assert_field(
            &report,
            "spec.config",
            Outcome::Dropped,
            None,
            "not converted",
        );
        assert!(report.notes[0].ends_with("create counter --type=weak hits; put --cache=a k v"));
        assert!(report.dropped_anything());
    }
}
