//! `spec.resources` of Backup and Restore: infinispan-operator passed its lists to the server as
//! they were, so once any kind was listed a kind left out (or listed empty) was not taken at all;
//! here a kind left out is taken entirely and `[]` means none of it (docs/migration.md, "What
//! `spec.resources` selects").

use common_crds::common::SelectedResources;

use super::fields::{FieldError, Fields};
use super::report::Log;

/// Takes `resources` of `spec`.
pub fn convert(spec: &mut Fields, log: &mut Log) -> Result<Option<SelectedResources>, FieldError> {
    let Some(mut fields) = spec.take_object("resources")? else {
        return Ok(None);
    };
    let mut list = |key: &str, log: &mut Log| -> Result<Option<Vec<String>>, FieldError> {
        let path = fields.path(key);
        let names: Option<Vec<String>> = fields.take_as(key)?;
        Ok(match names {
            Some(names) if !names.is_empty() => Some(names),
            Some(_) => {
                log.omitted(&path, "empty: the other operator left it out");
                None
            }
            None => None,
        })
    };
    let caches = list("caches", log)?;
    let counters = list("counters", log)?;
    let mut templates = list("templates", log)?;
    let schemas = list("protoSchemas", log)?;
    let mut tasks = list("tasks", log)?;
    let cache_configs = list("cacheConfigs", log)?;
    let scripts = list("scripts", log)?;
    // The other operator's webhook replaced templates with cacheConfigs and tasks with scripts
    // (deprecated names).
    let mut templates_from = "templates";
    if cache_configs.is_some() {
        if templates.is_some() {
            log.dropped(
                "spec.resources.templates",
                &serde_json::json!(templates),
                "replaced by spec.resources.cacheConfigs, as the other operator did",
            );
        }
        templates = cache_configs;
        templates_from = "cacheConfigs";
    }
    let mut tasks_from = "tasks";
    if scripts.is_some() {
        if tasks.is_some() {
            log.dropped(
                "spec.resources.tasks",
                &serde_json::json!(tasks),
                "replaced by spec.resources.scripts, as the other operator did",
            );
        }
        tasks = scripts;
        tasks_from = "scripts";
    }
    log.unknown(fields);
    let anything_listed = [&caches, &templates, &counters, &schemas, &tasks]
        .iter()
        .any(|names| names.is_some());
    if !anything_listed {
        log.removed(
            "spec.resources",
            "lists nothing: the other operator took everything, as a Backup or Restore without spec.resources does here",
        );
        return Ok(None);
    }
    let entry = |from: &str, to: &str, names: Option<Vec<String>>, log: &mut Log| {
        let to_path = format!("spec.resources.{to}");
        match names {
            Some(names) if from == to => {
                log.mapped(&to_path, "");
                Some(names)
            }
            Some(names) => {
                log.changed(&format!("spec.resources.{from}"), &to_path, "renamed");
                Some(names)
            }
            None => {
                log.changed(
                    &format!("spec.resources.{from}"),
                    &to_path,
                    "not listed: the other operator took none of them; [] here (left out would mean all of them)",
                );
                Some(Vec::new())
            }
        }
    };
    Ok(Some(SelectedResources {
        caches: entry("caches", "caches", caches, log),
        templates: entry(templates_from, "templates", templates, log),
        counters: entry("counters", "counters", counters, log),
        schemas: entry("protoSchemas", "schemas", schemas, log),
        tasks: entry(tasks_from, "tasks", tasks, log),
    }))
}
