//! Templates: the `Template` CR and a cache template on the server (design, issue "part 2").
//!
//! - The server object is the single-template JSON document of the events
//!   (`{"distributed-cache-configuration":{...}}`), as defined. CRs hold a cache document
//!   (`{"distributed-cache":{...}}`, YAML or XML too), which is what the server takes to create
//!   a template; the two are the same configuration, the template's element names end in
//!   `-configuration`.
//! - Created and removed through the REST client's task route (`@@template@create/remove`);
//!   the server has no update: templates are immutable (`Ready=False, reason=Immutable`, or
//!   recreated with `updates.strategy: recreate`).
//! - Equality is the server's own `compare` of the two cache documents (defaults and formats do
//!   not count, L3). Built-in `org.infinispan.*` templates are internal (E4).
//! - A recreate waits (`Pending`, naming them) while Cache CRs name the template in
//!   `templateName` (design D1, dependencies between kinds).

use common_crds::common::UpdateStrategy;
use common_crds::{Cache, ServerResource, Template};
use infinispan_rest::{
    Client, Comparison as ServerComparison, ConfigDocument, ConfigEvent, ConfigFormat,
    InternalObjects,
};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use serde_json::{Map, Value, json};

use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::json_digest;
use crate::engine::kind::{
    Compared, KindAdapter, KindError, ServerChange, gone_is_deleted, no_update_in_place,
};

/// The template adapter.
#[derive(Clone)]
pub struct TemplateAdapter {
    client: Client,
    internal: InternalObjects,
    /// The cluster's Cache CRs (the cache engine's store): which of them use a template.
    caches: Option<Store<Cache>>,
}

impl std::fmt::Debug for TemplateAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemplateAdapter")
            .field("internal", &self.internal)
            .finish_non_exhaustive()
    }
}

impl TemplateAdapter {
    pub fn new(client: Client, internal: InternalObjects) -> Self {
        Self {
            client,
            internal,
            caches: None,
        }
    }

    /// Knows the cluster's Cache CRs, so that a template is not recreated under caches that
    /// name it (design D1, dependencies between kinds).
    pub fn with_caches(mut self, caches: Store<Cache>) -> Self {
        self.caches = Some(caches);
        self
    }
}

/// The Cache CRs (not being deleted) that name `template` in `templateName`, as
/// `Cache <name>`, sorted.
pub fn users(caches: &[std::sync::Arc<Cache>], template: &str) -> Vec<String> {
    let mut users: Vec<String> = caches
        .iter()
        .filter(|cache| cache.metadata.deletion_timestamp.is_none())
        .filter(|cache| cache.spec.template_name.as_deref() == Some(template))
        .map(|cache| format!("Cache {}", cache.name_any()))
        .collect();
    users.sort();
    users
}

/// `{"distributed-cache-configuration":{...}}` -> `{"distributed-cache":{...}}`: the same
/// configuration as a cache document (what the server creates templates from and compares).
pub fn as_cache_document(template: &Value) -> Value {
    match template.as_object() {
        Some(map) if map.len() == 1 => {
            let renamed: Map<String, Value> = map
                .iter()
                .map(|(kind, body)| {
                    let kind = kind.strip_suffix("-configuration").unwrap_or(kind);
                    (kind.to_string(), body.clone())
                })
                .collect();
            Value::Object(renamed)
        }
        _ => template.clone(),
    }
}

fn server_document(object: &Value) -> ConfigDocument {
    ConfigDocument::json(as_cache_document(object).to_string())
}

fn desired(cr: &Template) -> ConfigDocument {
    ConfigDocument::detect(cr.spec.template.clone())
}

impl KindAdapter for TemplateAdapter {
    type Cr = Template;
    type Object = Value;

    fn capabilities(&self) -> KindCapabilities {
        KindCapabilities {
            update_in_place: false,
            create: true,
            delete: true,
        }
    }

    fn is_internal(&self, server_name: &str) -> bool {
        self.internal.is_internal(server_name)
    }

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<Value>)> {
        match event {
            ConfigEvent::TemplateCreated { name, config }
            | ConfigEvent::TemplateUpdated { name, config } => {
                Some((name.clone(), ServerChange::Present(config.clone())))
            }
            ConfigEvent::TemplateRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    fn digest(&self, object: &Value) -> String {
        json_digest(object)
    }

    async fn read(&self, server_name: &str) -> Result<Option<Value>, KindError> {
        Ok(self.client.template_definition(server_name).await?)
    }

    async fn create(&self, server_name: &str, cr: &Template) -> Result<(), KindError> {
        Ok(self
            .client
            .create_template(server_name, &desired(cr))
            .await?)
    }

    /// Never called: templates cannot change in place (the capabilities say so).
    async fn update(&self, server_name: &str, _cr: &Template) -> Result<(), KindError> {
        Err(no_update_in_place("template", server_name))
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        gone_is_deleted(self.client.remove_template(server_name).await)
    }

    async fn compare(&self, cr: &Template, object: &Value) -> Result<Compared, KindError> {
        let comparison = match self
            .client
            .compare_configs(&desired(cr), &server_document(object), false)
            .await?
        {
            ServerComparison::Equal => Comparison::Equal,
            ServerComparison::Different { .. } => Comparison::Different { in_place: false },
        };
        Ok(Compared::by_server(comparison, Vec::new()))
    }

    async fn mirror_spec(&self, server_name: &str, object: &Value) -> Result<Value, KindError> {
        Ok(json!({
            "name": server_name,
            "template": as_cache_document(object).to_string(),
        }))
    }

    async fn spec_patch_from_server(
        &self,
        cr: &Template,
        object: &Value,
    ) -> Result<Value, KindError> {
        let format = desired(cr).format;
        let text = match format {
            ConfigFormat::Json => as_cache_document(object).to_string(),
            ConfigFormat::Yaml | ConfigFormat::Xml => {
                self.client
                    .convert_config(&server_document(object), format)
                    .await?
                    .text
            }
        };
        Ok(json!({ "template": text }))
    }

    fn update_strategy(&self, cr: &Template) -> UpdateStrategy {
        cr.spec.update_strategy()
    }

    /// The Cache CRs created from the template: a recreate waits until none is left. (Caches
    /// created from it by other clients are not known: the server keeps no reference.)
    fn dependencies(&self, cr: &Template) -> Dependencies {
        let used_by = match (&self.caches, cr.server_name()) {
            (Some(caches), Some(name)) => users(&caches.state(), &name),
            _ => Vec::new(),
        };
        Dependencies {
            used_by,
            ..Dependencies::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_the_caches_naming_the_template() {
        let cache = |name: &str, template: Option<&str>, deleting: bool| {
            let mut cache = Cache::new(name, common_crds::CacheSpec::default());
            cache.spec.template_name = template.map(str::to_string);
            if deleting {
                cache.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ));
            }
            std::sync::Arc::new(cache)
        };
        let caches = [
            cache("b", Some("t"), false),
            cache("a", Some("t"), false),
            cache("c", Some("u"), false),
            cache("d", None, false),
            cache("e", Some("t"), true),
        ];
        assert_eq!(users(&caches, "t"), ["Cache a", "Cache b"]);
        assert!(users(&caches, "v").is_empty());
    }

    #[test]
    fn a_template_document_is_the_same_cache_document() {
        assert_eq!(
            as_cache_document(&json!({"distributed-cache-configuration": {"mode": "SYNC"}})),
            json!({"distributed-cache": {"mode": "SYNC"}})
        );
        assert_eq!(
            as_cache_document(&json!({"local-cache": {}})),
            json!({"local-cache": {}})
        );
    }
}
