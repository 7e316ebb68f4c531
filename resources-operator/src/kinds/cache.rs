//! Caches: the `Cache` CR and a cache on the server.
//!
//! - The server object is the single-cache JSON document the server gives in events and in
//!   `?action=config` (`{"distributed-cache":{...}}`), as defined, not expanded with defaults.
//! - Equality is the server's own `compare` (formats may differ; defaults do not count, L3); a
//!   difference is in place unless the comparison ignoring mutable attributes still differs.
//! - A CR whose document is YAML or XML gets server changes in its own format (the server's
//!   `convert`, S2).
//! - A CR with `templateName` is created from that template; the server keeps no reference to
//!   it, so the CR is compared with (and updated to) the template's configuration. It needs
//!   the template on the server (design D1), unless the template is the server's own.

use common_crds::Cache;
use common_crds::common::UpdateStrategy;
use infinispan_rest::{
    Client, Comparison as ServerComparison, ConfigDocument, ConfigEvent, ConfigFormat,
    CreateCacheOptions, EventKind, InternalObjects,
};
use serde_json::{Value, json};

use super::json_text::JsonText;

use crate::engine::catalog::Needed;
use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::json_digest;
use crate::engine::kind::{Compared, KindAdapter, KindError, ServerChange, gone_is_deleted};

/// The cache adapter.
#[derive(Debug, Clone)]
pub struct CacheAdapter {
    client: Client,
    internal: InternalObjects,
}

impl CacheAdapter {
    pub fn new(client: Client, internal: InternalObjects) -> Self {
        Self { client, internal }
    }
}

/// What a Cache CR asks for.
enum Desired {
    Document(ConfigDocument),
    Template(String),
}

fn desired(cr: &Cache) -> Result<Desired, KindError> {
    match (&cr.spec.template, &cr.spec.template_name) {
        (Some(document), None) => Ok(Desired::Document(ConfigDocument::detect(document.clone()))),
        (None, Some(template)) => Ok(Desired::Template(template.clone())),
        (Some(_), Some(_)) | (None, None) => Err(KindError::Invalid {
            what: "Cache spec".to_string(),
            message: common_crds::cache::TEMPLATE_XOR_MESSAGE.to_string(),
        }),
    }
}

/// `{"<name>":{...}}` (the answer of `?action=config`) -> `{...}`.
fn unwrap_named(name: &str, document: &str) -> Result<Value, KindError> {
    let value: Value = serde_json::from_str(document).map_err(|error| KindError::Invalid {
        what: format!("configuration of cache '{name}' from the server"),
        message: error.to_string(),
    })?;
    match value {
        Value::Object(mut map) if map.len() == 1 => Ok(map.remove(name).unwrap_or_else(|| {
            map.into_iter()
                .next()
                .map(|(_, v)| v)
                .unwrap_or(Value::Null)
        })),
        other => Ok(other),
    }
}

/// Whether `document` is a JSON document equal, as JSON, to `object`, scalars compared as
/// text: the server stores and sends every scalar as a string (`{"lifespan":60000}` comes back
/// as `{"lifespan":"60000"}`), so `60000` and `"60000"`, `true` and `"true"` mean the same.
fn same_json(document: &ConfigDocument, object: &Value) -> bool {
    fn as_text(value: &Value) -> Value {
        match value {
            Value::Number(n) => Value::String(n.to_string()),
            Value::Bool(b) => Value::String(b.to_string()),
            Value::Array(items) => Value::Array(items.iter().map(as_text).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), as_text(v))).collect())
            }
            other => other.clone(),
        }
    }
    document.format == ConfigFormat::Json
        && serde_json::from_str::<Value>(&document.text)
            .is_ok_and(|value| as_text(&value) == as_text(object))
}

fn server_document(object: &Value) -> ConfigDocument {
    ConfigDocument::json(object.to_string())
}

impl CacheAdapter {
    /// The configuration a cache created from `template` has: the template's own (the server
    /// resolves the template at creation and keeps no reference to it), as a cache document
    /// (`local-cache`, not the definition's `local-cache-configuration`: the server's compare
    /// tells the two apart, and an update with the definition changes nothing, so the CR never
    /// got in sync). `None` when the server has no such template.
    async fn template_document(&self, template: &str) -> Result<Option<ConfigDocument>, KindError> {
        Ok(self
            .client
            .template_definition(template)
            .await?
            .map(|inner| server_document(&super::template::as_cache_document(&inner))))
    }

    /// The server's comparison of the CR with the cache (design L3, server defaults stay out of
    /// spec); with `classify`, a difference is classified by a second comparison that ignores
    /// mutable attributes (only they differ: the server can take the change in place), else it is
    /// reported as not in place without the server's reasons.
    async fn compare_classifying(
        &self,
        cr: &Cache,
        object: &JsonText,
        classify: bool,
    ) -> Result<Compared, KindError> {
        let object = &object.value();
        let equal = Compared::local(Comparison::Equal, Vec::new());
        // A CR naming a template is compared through the template's configuration; without
        // the template (removed since) there is nothing to compare with: taken as equal.
        let Some(document) = self.desired_document(cr).await? else {
            return Ok(equal);
        };
        // The very document the server holds (a mirror CR, or a CR whose spec the operator
        // just rewrote from the server's event) is equal without asking the server: the
        // server's compare is only for documents that differ in text.
        if same_json(&document, object) {
            return Ok(equal);
        }
        let server = server_document(object);
        if self
            .client
            .compare_configs(&document, &server, false)
            .await?
            == ServerComparison::Equal
        {
            return Ok(Compared::by_server(Comparison::Equal, Vec::new()));
        }
        if !classify {
            return Ok(Compared::by_server(
                Comparison::Different { in_place: false },
                Vec::new(),
            ));
        }
        Ok(
            match self
                .client
                .compare_configs(&document, &server, true)
                .await?
            {
                ServerComparison::Equal => {
                    Compared::by_server(Comparison::Different { in_place: true }, Vec::new())
                }
                ServerComparison::Different { reason } => {
                    Compared::by_server(Comparison::Different { in_place: false }, reason)
                }
            },
        )
    }

    /// What the CR asks the server's cache to be, as a document: its own, or its template's.
    async fn desired_document(&self, cr: &Cache) -> Result<Option<ConfigDocument>, KindError> {
        match desired(cr)? {
            Desired::Document(document) => Ok(Some(document)),
            Desired::Template(template) => self.template_document(&template).await,
        }
    }
}

impl KindAdapter for CacheAdapter {
    type Cr = Cache;
    /// Kept as text: see [`JsonText`].
    type Object = JsonText;

    fn capabilities(&self) -> KindCapabilities {
        KindCapabilities {
            update_in_place: true,
            create: true,
            delete: true,
        }
    }

    fn is_internal(&self, server_name: &str) -> bool {
        self.internal.is_internal(server_name)
    }

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<JsonText>)> {
        match event {
            ConfigEvent::CacheCreated { name, config }
            | ConfigEvent::CacheUpdated { name, config } => {
                Some((name.clone(), ServerChange::Present(JsonText::of(config))))
            }
            ConfigEvent::CacheRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    fn digest(&self, object: &JsonText) -> String {
        json_digest(&object.value())
    }

    async fn read(&self, server_name: &str) -> Result<Option<JsonText>, KindError> {
        match self
            .client
            .cache_config(server_name, ConfigFormat::Json)
            .await
        {
            Ok(document) => Ok(Some(JsonText::of(&unwrap_named(
                server_name,
                &document.text,
            )?))),
            Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn create(&self, server_name: &str, cr: &Cache) -> Result<(), KindError> {
        let options = CreateCacheOptions::default();
        match desired(cr)? {
            Desired::Document(document) => {
                self.client
                    .create_cache(server_name, &document, options)
                    .await?;
            }
            Desired::Template(template) => {
                self.client
                    .create_cache_from_template(server_name, &template, options)
                    .await?;
            }
        }
        Ok(())
    }

    /// A CR naming a template updates the cache to the template's configuration.
    async fn update(&self, server_name: &str, cr: &Cache) -> Result<(), KindError> {
        match self.desired_document(cr).await? {
            Some(document) => Ok(self.client.update_cache(server_name, &document).await?),
            None => Err(KindError::Invalid {
                what: "Cache spec.templateName".to_string(),
                message: format!(
                    "the server has no template {:?}",
                    cr.spec.template_name.as_deref().unwrap_or_default()
                ),
            }),
        }
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        gone_is_deleted(self.client.delete_cache(server_name).await)
    }

    async fn compare(&self, cr: &Cache, object: &JsonText) -> Result<Compared, KindError> {
        self.compare_classifying(cr, object, true).await
    }

    async fn compare_unclassified(
        &self,
        cr: &Cache,
        object: &JsonText,
    ) -> Result<Option<Compared>, KindError> {
        self.compare_classifying(cr, object, false).await.map(Some)
    }

    fn held_digest(&self, cr: &Cache) -> Option<String> {
        match desired(cr) {
            Ok(Desired::Document(document)) if document.format == ConfigFormat::Json => {
                serde_json::from_str::<Value>(&document.text)
                    .ok()
                    .map(|value| json_digest(&value))
            }
            Ok(_) | Err(_) => None,
        }
    }

    async fn mirror_spec(&self, server_name: &str, object: &JsonText) -> Result<Value, KindError> {
        Ok(json!({
            "name": server_name,
            "template": object.text(),
        }))
    }

    async fn spec_patch_from_server(
        &self,
        cr: &Cache,
        object: &JsonText,
    ) -> Result<Value, KindError> {
        let format = match desired(cr) {
            Ok(Desired::Document(document)) => document.format,
            Ok(Desired::Template(_)) | Err(_) => ConfigFormat::Json,
        };
        let text = match format {
            ConfigFormat::Json => object.text().to_string(),
            ConfigFormat::Yaml | ConfigFormat::Xml => {
                self.client
                    .convert_config(&ConfigDocument::json(object.text()), format)
                    .await?
                    .text
            }
        };
        Ok(json!({ "template": text, "templateName": Value::Null }))
    }

    fn update_strategy(&self, cr: &Cache) -> UpdateStrategy {
        cr.spec.update_strategy()
    }

    fn dependencies(&self, _cr: &Cache) -> Dependencies {
        Dependencies::default()
    }

    /// A user template named by `templateName` (design D1, dependencies between kinds). The
    /// server's own templates (`org.infinispan.*`) are always there (not all of them are replayed
    /// by the stream). Its template (by `templateName`), and the message types it indexes: a schema
    /// must declare them first (the server would create the cache anyway, without those indexes).
    fn needs(&self, cr: &Cache) -> Vec<Needed> {
        match (
            cr.spec.template_name.as_deref(),
            cr.spec.template.as_deref(),
        ) {
            (Some(template), _) if !self.internal.is_internal(template) => {
                vec![Needed::new(EventKind::Template, template)]
            }
            (None, Some(document)) => indexed_entities(document)
                .into_iter()
                .map(Needed::MessageType)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The entity types a cache document indexes (`indexed-entities` in JSON and XML,
/// `indexedEntities` in YAML). A document that does not parse has none (the server says what is
/// wrong with it when the cache is created).
pub fn indexed_entities(document: &str) -> Vec<String> {
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    if matches!(key.as_str(), "indexed-entities" | "indexedEntities") {
                        let names: Vec<&Value> = match value {
                            Value::Array(items) => items.iter().collect(),
                            // `{"indexed-entity": [...]}`, as a converted XML document has it.
                            Value::Object(inner) => inner.values().collect(),
                            other => vec![other],
                        };
                        for name in names {
                            match name {
                                Value::String(s) => out.push(s.clone()),
                                Value::Array(items) => out.extend(
                                    items.iter().filter_map(Value::as_str).map(str::to_string),
                                ),
                                _ => {}
                            }
                        }
                    } else {
                        collect(value, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    match ConfigFormat::detect(document) {
        ConfigFormat::Json => {
            if let Ok(value) = serde_json::from_str::<Value>(document) {
                collect(&value, &mut out);
            }
        }
        ConfigFormat::Yaml => {
            if let Ok(value) = serde_saphyr::from_str::<Value>(document) {
                collect(&value, &mut out);
            }
        }
        ConfigFormat::Xml => {
            let mut rest = document;
            while let Some(start) = rest.find("<indexed-entity>") {
                rest = &rest[start + "<indexed-entity>".len()..];
                if let Some(end) = rest.find("</indexed-entity>") {
                    out.push(rest[..end].trim().to_string());
                    rest = &rest[end..];
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn indexed_entities_in_every_format() {
        let json = r#"{"distributed-cache":{"indexing":{"enabled":true,"indexed-entities":["lib.Book","lib.Author"]}}}"#;
        assert_eq!(indexed_entities(json), ["lib.Author", "lib.Book"]);
        let yaml = "distributedCache:\n  indexing:\n    enabled: true\n    indexedEntities:\n      - lib.Book\n";
        assert_eq!(indexed_entities(yaml), ["lib.Book"]);
        let xml = "<distributed-cache><indexing enabled=\"true\"><indexed-entities><indexed-entity>lib.Book</indexed-entity></indexed-entities></indexing></distributed-cache>";
        assert_eq!(indexed_entities(xml), ["lib.Book"]);
        assert!(indexed_entities(r#"{"local-cache":{}}"#).is_empty());
        assert!(indexed_entities("{not json").is_empty());
    }

    use super::*;

    #[test]
    fn unwraps_the_named_document() -> Result<(), KindError> {
        let inner = unwrap_named("c", r#"{"c":{"distributed-cache":{"mode":"SYNC"}}}"#)?;
        assert_eq!(inner, json!({"distributed-cache":{"mode":"SYNC"}}));
        Ok(())
    }

    /// An adapter whose client points at a closed port: any server call fails.
    fn offline_adapter() -> CacheAdapter {
        let client = Client::new(infinispan_rest::ClientConfig::new("http://127.0.0.1:9"))
            .expect("a client");
        CacheAdapter::new(client, InternalObjects::default())
    }

    /// A CR holding the server's own document is equal without a server call (the client
    /// here points at a closed port: a call would fail); any other text still goes to the
    /// server's compare.
    #[tokio::test]
    async fn the_same_json_document_is_equal_without_asking_the_server() {
        let adapter = offline_adapter();
        let value =
            json!({"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":"70000012"}}});
        let object = JsonText::of(&value);
        let mut cr = Cache::new("c", common_crds::CacheSpec::default());
        cr.spec.template = Some(value.to_string());
        let compared = adapter.compare(&cr, &object).await.expect("no server call");
        assert_eq!(compared.comparison, Comparison::Equal);
        // Key order and blanks do not matter; another value, a missing attribute or another
        // format goes to the server's compare.
        cr.spec.template = Some(
            r#"{ "distributed-cache": { "expiration": {"lifespan": "70000012"}, "mode": "SYNC" } }"#
                .to_string(),
        );
        assert!(adapter.compare(&cr, &object).await.is_ok());
        // A number where the server has the same digits as a string: the same.
        cr.spec.template = Some(
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":70000012}}}"#
                .to_string(),
        );
        assert!(adapter.compare(&cr, &object).await.is_ok());
        for other in [
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":70000013}}}"#,
            r#"{"distributed-cache":{"mode":"SYNC"}}"#,
            "distributedCache:\n  mode: SYNC\n",
        ] {
            cr.spec.template = Some(other.to_string());
            assert!(adapter.compare(&cr, &object).await.is_err(), "{other}");
        }
    }

    /// A mirror's spec (and a spec rewritten from the server) holds the server object whose
    /// digest it has; a user's own document, in another format or naming a template, holds none
    /// the engine could trust.
    #[tokio::test]
    async fn a_mirror_holds_the_digest_of_its_server_object() -> Result<(), KindError> {
        let adapter = offline_adapter();
        let object = JsonText::of(
            &json!({"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":"60000"}}}),
        );
        let spec = adapter.mirror_spec("c", &object).await?;
        let cr = Cache::new("c", serde_json::from_value(spec).expect("a Cache spec"));
        assert_eq!(adapter.held_digest(&cr), Some(adapter.digest(&object)));
        let mut user = Cache::new("c", common_crds::CacheSpec::default());
        user.spec.template = Some(
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":60000}}}"#.to_string(),
        );
        assert_ne!(adapter.held_digest(&user), Some(adapter.digest(&object)));
        user.spec.template = Some("distributedCache:\n  mode: SYNC\n".to_string());
        assert_eq!(adapter.held_digest(&user), None);
        user.spec.template = None;
        user.spec.template_name = Some("t".to_string());
        assert_eq!(adapter.held_digest(&user), None);
        Ok(())
    }

    /// Without classification a difference costs one server call: the client points at a
    /// closed port, so the error is that of the first call either way; an equal document
    /// needs none.
    #[tokio::test]
    async fn an_unclassified_comparison_of_the_same_document_asks_nothing() {
        let adapter = offline_adapter();
        let object = JsonText::of(&json!({"local-cache":{}}));
        let mut cr = Cache::new("c", common_crds::CacheSpec::default());
        cr.spec.template = Some(object.text().to_string());
        let compared = adapter
            .compare_unclassified(&cr, &object)
            .await
            .expect("no server call");
        assert_eq!(compared.map(|c| c.comparison), Some(Comparison::Equal));
        cr.spec.template = Some(r#"{"local-cache":{"statistics":true}}"#.to_string());
        assert!(adapter.compare_unclassified(&cr, &object).await.is_err());
    }

    #[test]
    fn a_spec_needs_exactly_one_source() {
        let mut cr = Cache::new("c", common_crds::CacheSpec::default());
        assert!(desired(&cr).is_err());
        cr.spec.template = Some("localCache: {}".to_string());
        assert!(matches!(desired(&cr), Ok(Desired::Document(d)) if d.format == ConfigFormat::Yaml));
        cr.spec.template_name = Some("t".to_string());
        assert!(desired(&cr).is_err());
    }
}
