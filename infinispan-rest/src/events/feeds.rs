//! Feeds: the config stream's items ([`StreamItem`]) for kinds it does not carry on every
//! server version, so that the sync treats every kind alike (snapshot on each connect, then
//! changes, reconnects with backoff).
//!
//! - **Schemas** and **tasks** live in internal caches (`___protobuf_metadata`,
//!   `___script_cache`) whose entry events the REST API streams
//!   (`GET /rest/v2/caches/{cache}?action=listen`, checked on 16.0.7): each connection lists the
//!   cache's entries once (the snapshot: one request, contents included), then every
//!   `cache-entry-created|modified|removed` event (data = the key) re-reads that one object.
//!   Always `Accept: text/plain`: a listener asking for JSON makes the server fail every
//!   later write to the cache with `ISPN000655` (the listener outlives its connection; seen on
//!   16.0.7, a server restart clears it). The listener is registered before the list is taken,
//!   so no change falls between the two.
//! - **Counters** are in a private cache: their feed lists the names every `interval` and reads
//!   the definition of each new name (definitions cannot change). A counter deleted and
//!   re-created between two lists is not seen as changed. Counter events exist from 16.2 but
//!   reach only the node that handled the change (design R5): the list is the one source.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;

use super::ConfigEvent;
use super::freshness::Freshness;
use super::sse::SseParser;
use super::stream::{
    Closed, ConfigEventStream, Next, StreamItem, StreamOptions, bounded, next, open, send, stale,
};
use crate::client::{Client, Req};
use crate::counters::CounterConfig;
use crate::error::Error;
use crate::kind::EventKind;
use crate::names::encode;
use crate::server::ConfigNames;
use crate::tasks::SCRIPT_CACHE;

/// The internal cache holding Protobuf schemas (key `<name>.proto`) and their validation
/// errors (key `<name>.proto.errors`; the key `.errors` lists the schemas with errors).
pub const SCHEMA_CACHE: &str = "___protobuf_metadata";

const ERRORS_SUFFIX: &str = ".errors";

impl Client {
    /// Schemas as [`ConfigEvent::SchemaCreated`] (snapshot) and
    /// [`ConfigEvent::SchemaUpdated`]/[`ConfigEvent::SchemaRemoved`] (changes), with their
    /// validation errors.
    pub fn schema_feed(&self, options: StreamOptions) -> ConfigEventStream {
        let client = self.clone();
        ConfigEventStream::spawn(options.buffer, move |tx| {
            reconnecting(client, options, tx, Listener::new(EntryFeed::Schemas))
        })
    }

    /// Script tasks as [`ConfigEvent::TaskUpdated`]/[`ConfigEvent::TaskRemoved`].
    pub fn task_feed(&self, options: StreamOptions) -> ConfigEventStream {
        let client = self.clone();
        ConfigEventStream::spawn(options.buffer, move |tx| {
            reconnecting(client, options, tx, Listener::new(EntryFeed::Tasks))
        })
    }

    /// Counters as [`ConfigEvent::CounterCreated`]/[`ConfigEvent::CounterRemoved`], from a
    /// names list every `interval`. `created`: the counters the caller creates, told to the
    /// feed so that their removal is reported even when no list ever had them.
    pub fn counter_feed(
        &self,
        interval: Duration,
        options: StreamOptions,
        created: CreatedCounters,
    ) -> ConfigEventStream {
        let client = self.clone();
        ConfigEventStream::spawn(options.buffer, move |tx| {
            reconnecting(client, options, tx, CounterPoll::new(interval, created))
        })
    }

    /// Every entry of a cache, as text (`?action=entries`, one request).
    pub async fn cache_entries(&self, cache: &str) -> Result<Vec<(String, String)>, Error> {
        #[derive(Deserialize)]
        struct Entry {
            key: String,
            value: String,
        }
        let what = format!("list the entries of cache '{cache}'");
        let entries: Vec<Entry> = self
            .expect(
                Req::get(format!(
                    "/rest/v2/caches/{}?action=entries&limit=-1",
                    encode(cache)
                ))
                .accept("application/json"),
                &what,
                &[200],
            )
            .await?
            .json(&what)?;
        Ok(entries.into_iter().map(|e| (e.key, e.value)).collect())
    }

    /// The keys of an internal cache (no values: the names probe of the schema and task
    /// feeds).
    pub async fn cache_keys(&self, cache: &str) -> Result<Vec<String>, Error> {
        let what = format!("list the keys of cache '{cache}'");
        self.expect(
            Req::get(format!(
                "/rest/v2/caches/{}?action=keys&limit=-1",
                encode(cache)
            ))
            .accept("application/json"),
            &what,
            &[200],
        )
        .await?
        .json(&what)
    }

    /// A schema's text and validation error, as the server stores them (two reads of the
    /// schema cache, no list); `None` when the server has no such schema.
    pub async fn schema_with_error(
        &self,
        name: &str,
    ) -> Result<Option<(String, Option<String>)>, Error> {
        let Some(proto) = self.cache_entry(SCHEMA_CACHE, name).await? else {
            return Ok(None);
        };
        let errors = self
            .cache_entry(SCHEMA_CACHE, &format!("{name}{ERRORS_SUFFIX}"))
            .await?;
        Ok(Some((proto, errors)))
    }

    /// One entry of a cache as text; `None` when absent.
    pub async fn cache_entry(&self, cache: &str, key: &str) -> Result<Option<String>, Error> {
        let what = format!("read entry '{key}' of cache '{cache}'");
        let r = self
            .call(
                Req::get(format!("/rest/v2/caches/{}/{}", encode(cache), encode(key)))
                    .accept("text/plain"),
                &what,
            )
            .await?;
        match r.status.as_u16() {
            200 => Ok(Some(r.text())),
            404 => Ok(None),
            _ => Err(crate::error::from_response(&what, r.status, &r.text())),
        }
    }

    /// Creates the text entry `key` of a cache unless it exists (`POST`, the server's
    /// put-if-absent): true when this call created it, false when it existed (409).
    pub async fn create_cache_entry(
        &self,
        cache: &str,
        key: &str,
        value: &str,
    ) -> Result<bool, Error> {
        let what = format!("create entry '{key}' of cache '{cache}'");
        let r = self
            .call(
                Req::new(
                    http::Method::POST,
                    format!("/rest/v2/caches/{}/{}", encode(cache), encode(key)),
                )
                .body("text/plain", value.to_owned()),
                &what,
            )
            .await?;
        match r.status.as_u16() {
            200 | 204 => Ok(true),
            409 => Ok(false),
            _ => Err(crate::error::from_response(&what, r.status, &r.text())),
        }
    }
}

/// One connection of a feed: sends the snapshot and then the changes; returns why it ended.
trait Connection: Send + 'static {
    fn what(&self) -> &'static str;
    fn connect_once(
        &mut self,
        client: &Client,
        opts: &StreamOptions,
        tx: &mpsc::Sender<StreamItem>,
        session: &mut Session,
    ) -> impl Future<Output = Result<Error, Closed>> + Send;
}

/// Counts connections and consecutive failures.
#[derive(Debug, Default)]
struct Session {
    connection: u64,
    failures: u32,
}

impl Session {
    /// A connection is made: announce it (no names: feeds end their replay themselves).
    async fn connected(&mut self, tx: &mpsc::Sender<StreamItem>) -> Result<u64, Closed> {
        self.connection += 1;
        self.failures = 0;
        send(
            tx,
            StreamItem::Connected {
                connection: self.connection,
                names: ConfigNames::default(),
            },
        )
        .await?;
        Ok(self.connection)
    }
}

async fn reconnecting(
    client: Client,
    opts: StreamOptions,
    tx: mpsc::Sender<StreamItem>,
    mut feed: impl Connection,
) {
    let mut session = Session::default();
    loop {
        let error = match feed.connect_once(&client, &opts, &tx, &mut session).await {
            Ok(error) => error,
            Err(Closed) => return,
        };
        let retry_in = opts.backoff.delay(session.failures);
        session.failures = session.failures.saturating_add(1);
        tracing::debug!(feed = feed.what(), %error, ?retry_in, failures = session.failures, "feed disconnected");
        let item = StreamItem::Disconnected {
            error,
            retry_in,
            failures: session.failures,
        };
        if send(&tx, item).await.is_err() {
            return;
        }
        tokio::time::sleep(retry_in).await;
    }
}

/// A kind kept in an internal cache, followed through the cache's entry events.
#[derive(Debug, Clone, Copy)]
pub(super) enum EntryFeed {
    Schemas,
    Tasks,
}

/// An entry feed with what tells whether its listener still delivers (see
/// [`super::freshness`]), across its connections.
#[derive(Debug)]
struct Listener {
    feed: EntryFeed,
    freshness: Freshness,
}

impl Listener {
    fn new(feed: EntryFeed) -> Self {
        Self {
            feed,
            freshness: Freshness::new(feed.kinds()),
        }
    }
}

impl EntryFeed {
    fn kind(self) -> EventKind {
        match self {
            EntryFeed::Schemas => EventKind::Schema,
            EntryFeed::Tasks => EventKind::Task,
        }
    }

    fn kinds(self) -> &'static [EventKind] {
        match self {
            EntryFeed::Schemas => &[EventKind::Schema],
            EntryFeed::Tasks => &[EventKind::Task],
        }
    }

    /// The objects a key of the cache stands for: every key for tasks, the schemas' own keys
    /// (not their errors, nor the `.errors` index) for schemas.
    fn is_object_key(self, key: &str) -> bool {
        match self {
            EntryFeed::Tasks => true,
            EntryFeed::Schemas => !key.ends_with(ERRORS_SUFFIX),
        }
    }

    pub(super) fn cache(self) -> &'static str {
        match self {
            EntryFeed::Schemas => SCHEMA_CACHE,
            EntryFeed::Tasks => SCRIPT_CACHE,
        }
    }

    /// The objects of a listing of the cache.
    pub(super) fn snapshot(self, entries: Vec<(String, String)>) -> Vec<ConfigEvent> {
        match self {
            EntryFeed::Tasks => entries
                .into_iter()
                .map(|(name, script)| ConfigEvent::TaskUpdated { name, script })
                .collect(),
            EntryFeed::Schemas => {
                let (errors, schemas): (Vec<_>, Vec<_>) = entries
                    .into_iter()
                    .partition(|(key, _)| key.ends_with(ERRORS_SUFFIX));
                let errors: HashMap<String, String> = errors
                    .into_iter()
                    .filter_map(|(key, text)| {
                        key.strip_suffix(ERRORS_SUFFIX)
                            .map(|name| (name.to_owned(), text))
                    })
                    .collect();
                schemas
                    .into_iter()
                    .map(|(name, proto)| ConfigEvent::SchemaCreated {
                        errors: errors.get(&name).cloned(),
                        name,
                        proto,
                    })
                    .collect()
            }
        }
    }

    /// The object an entry event is about, or `None` when the key is no object of this kind
    /// (the schema cache's `.errors` index) or concerns none known (errors of a schema never
    /// seen: its own entry's event follows).
    fn object_of(self, key: &str, known: &HashSet<String>) -> Option<String> {
        match self {
            EntryFeed::Tasks => Some(key.to_owned()),
            EntryFeed::Schemas => match key.strip_suffix(ERRORS_SUFFIX) {
                Some(name) if known.contains(name) => Some(name.to_owned()),
                Some(_) => None,
                None => Some(key.to_owned()),
            },
        }
    }

    /// Reads one object again: its change event.
    async fn read(self, client: &Client, name: &str) -> Result<ConfigEvent, Error> {
        let name = name.to_owned();
        match self {
            EntryFeed::Tasks => Ok(match client.cache_entry(SCRIPT_CACHE, &name).await? {
                Some(script) => ConfigEvent::TaskUpdated { name, script },
                None => ConfigEvent::TaskRemoved { name },
            }),
            EntryFeed::Schemas => match client.schema_with_error(&name).await? {
                None => Ok(ConfigEvent::SchemaRemoved { name }),
                Some((proto, errors)) => Ok(ConfigEvent::SchemaUpdated {
                    name,
                    proto,
                    errors,
                }),
            },
        }
    }
}

impl Connection for Listener {
    fn what(&self) -> &'static str {
        match self.feed {
            EntryFeed::Schemas => "listen to schema changes",
            EntryFeed::Tasks => "listen to task changes",
        }
    }

    async fn connect_once(
        &mut self,
        client: &Client,
        opts: &StreamOptions,
        tx: &mpsc::Sender<StreamItem>,
        session: &mut Session,
    ) -> Result<Error, Closed> {
        let what = self.what();
        let feed = self.feed;
        // Never JSON here (see the module docs).
        let listen = Req::get(format!(
            "/rest/v2/caches/{}?action=listen&includeCurrentState=true",
            encode(feed.cache())
        ))
        .accept("text/plain");
        let mut body = match open(client, listen, opts, what).await {
            Ok(body) => body,
            Err(e) => return Ok(e),
        };
        let entries = match client.cache_entries(feed.cache()).await {
            Ok(entries) => entries,
            Err(e) => return Ok(e),
        };
        let connection = session.connected(tx).await?;
        self.freshness.connected();
        let mut known = HashSet::new();
        for event in feed.snapshot(entries) {
            if let Some((_, name)) = event.object() {
                known.insert(name.to_owned());
            }
            self.freshness.event(&event);
            send(tx, StreamItem::Event(event)).await?;
        }
        send(tx, StreamItem::ReplayComplete { connection }).await?;
        let mut parser = SseParser::with_limit(client.config().max_event_bytes);
        loop {
            match next(&mut body, &mut parser, opts.probe_interval, what).await {
                Err(e) => return Ok(e),
                Ok(Next::Silence) => {
                    let keys = bounded(
                        opts,
                        "names probe of the feed's server",
                        client.cache_keys(feed.cache()),
                    );
                    let keys = match keys.await {
                        Ok(keys) => keys,
                        Err(e) => return Ok(e),
                    };
                    let listed = keys
                        .iter()
                        .filter(|key| feed.is_object_key(key))
                        .map(|key| (feed.kind(), key.as_str()));
                    if let Some(error) = stale(self.freshness.probe(listed), what, opts) {
                        return Ok(error);
                    }
                }
                Ok(Next::Events(events)) => {
                    self.freshness.delivered();
                    // One read per object, however many of its entries changed in this chunk.
                    let mut names: Vec<String> = Vec::new();
                    for sse in events {
                        if let Some(name) = feed.object_of(sse.data.trim_end(), &known)
                            && !names.contains(&name)
                        {
                            names.push(name);
                        }
                    }
                    for name in names {
                        let event = match feed.read(client, &name).await {
                            Ok(event) => event,
                            Err(e) => return Ok(e),
                        };
                        if event.is_removal() {
                            known.remove(&name);
                        } else {
                            known.insert(name);
                        }
                        self.freshness.event(&event);
                        send(tx, StreamItem::Event(event)).await?;
                    }
                }
            }
        }
    }
}

/// Counters the caller created, for its counter feed (chaos finding 11). The feed reports a
/// removal only for a name it listed before; the caller, after creating a counter, takes it as
/// present (the sync reads it back at once, so that the echo changes nothing). Created and
/// removed by another client between two lists, such a counter was never reported gone: its CR
/// stayed, claiming an object the server no longer had. Told here, the feed takes the name as
/// known from its next list on (a list started after the creation completed) and reports it
/// created or removed like any other.
#[derive(Debug, Clone, Default)]
pub struct CreatedCounters(Arc<Mutex<Vec<String>>>);

impl CreatedCounters {
    /// `name` was created (the server answered).
    pub fn created(&self, name: &str) {
        self.with(|names| names.push(name.to_owned()));
    }

    fn take(&self) -> Vec<String> {
        self.with(std::mem::take)
    }

    /// The names told since the last [`CreatedCounters::take`], left for the next one.
    fn pending(&self) -> HashSet<String> {
        self.with(|names| names.iter().cloned().collect())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Vec<String>) -> T) -> T {
        match self.0.lock() {
            Ok(mut names) => f(&mut names),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

/// Counters: the names list every `interval`, and the definitions of new names and of up to
/// [`RECHECKED_PER_POLL`] known ones in turn. A counter's definition never changes in place:
/// a known name with another definition was removed and created again between two polls (a
/// name present in both lists otherwise hides that: chaos finding 9, docs/chaos.md), and is
/// reported as both.
#[derive(Debug)]
struct CounterPoll {
    interval: Duration,
    /// Where the next re-check of known definitions starts (an index into the sorted names).
    cursor: usize,
    created: CreatedCounters,
}

/// Known counters whose definition is read again per poll: all of them up to that many (so a
/// recreation is seen at the next poll), in turn beyond (each within `known / 32` polls),
/// keeping the poll's requests bounded.
const RECHECKED_PER_POLL: usize = 32;

impl CounterPoll {
    fn new(interval: Duration, created: CreatedCounters) -> Self {
        Self {
            interval,
            cursor: 0,
            created,
        }
    }
}

/// The known names (sorted) to read again this poll, starting at `cursor`, and the next cursor.
fn recheck_batch(known: &[String], cursor: usize, per_poll: usize) -> (Vec<String>, usize) {
    if known.is_empty() {
        return (Vec::new(), 0);
    }
    let start = cursor % known.len();
    let take = per_poll.min(known.len());
    let batch = (0..take)
        .map(|i| known[(start + i) % known.len()].clone())
        .collect();
    (batch, (start + take) % known.len())
}

impl Connection for CounterPoll {
    fn what(&self) -> &'static str {
        "list counters"
    }

    async fn connect_once(
        &mut self,
        client: &Client,
        _opts: &StreamOptions,
        tx: &mpsc::Sender<StreamItem>,
        session: &mut Session,
    ) -> Result<Error, Closed> {
        let mut known: HashMap<String, CounterConfig> = HashMap::new();
        // Created by the caller and not listed yet: present as far as the caller knows.
        let mut told: HashSet<String> = HashSet::new();
        let mut connection = None;
        loop {
            // Before the list: a list started after a creation completed shows it, or its
            // removal. A known name created again by the caller (a recreation: delete, then
            // create) is read again whatever the re-check turn, and its new definition is no
            // removal (the caller read it back already).
            let ours: HashSet<String> = self.created.take().into_iter().collect();
            told.extend(
                ours.iter()
                    .filter(|name| !known.contains_key(*name))
                    .cloned(),
            );
            let names = match client.list_counters().await {
                Ok(names) => names,
                Err(e) => return Ok(e),
            };
            // Removals first, then creations: a recreated name's removal before its new
            // definition.
            let mut removed = Vec::new();
            let mut created = Vec::new();
            let listed_known: Vec<String> = {
                let mut names: Vec<String> = names
                    .iter()
                    .filter(|name| known.contains_key(*name))
                    .cloned()
                    .collect();
                names.sort();
                names
            };
            let (recheck, cursor) = recheck_batch(&listed_known, self.cursor, RECHECKED_PER_POLL);
            self.cursor = cursor;
            let recheck: HashSet<&String> = recheck.iter().collect();
            // Known names with another definition: removed and created again since the last
            // poll, unless the caller did it.
            let mut recreated = Vec::new();
            for name in &names {
                let previous = known.get(name);
                if previous.is_some() && !recheck.contains(name) && !ours.contains(name) {
                    continue;
                }
                match client.counter_config(name).await {
                    Ok(config) if previous == Some(&config) => {}
                    Ok(config) => {
                        if previous.is_some() {
                            recreated.push(name.clone());
                        }
                        known.insert(name.clone(), config.clone());
                        created.push(ConfigEvent::CounterCreated {
                            name: name.clone(),
                            config,
                        });
                    }
                    // Deleted between the list and the read (a known one: the next list
                    // reports it gone).
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Ok(e),
                }
            }
            let listed: HashSet<&String> = names.iter().collect();
            // Created by the caller while this poll ran: the list may predate the creation (a
            // recreation's delete seen, its create not), so an absence proves nothing, and a
            // new definition is the caller's; the next list, started after the creation, tells
            // (seen in CI on 2026-12-02: a counter recreated for a CR change, design K2, reported
            // removed after the caller had read the new one back, and its CR deleted).
            let during = self.created.pending();
            let by_caller = |name: &String| ours.contains(name) || during.contains(name);
            removed.extend(
                recreated
                    .into_iter()
                    .filter(|name| !by_caller(name))
                    .map(|name| ConfigEvent::CounterRemoved { name }),
            );
            let gone: Vec<String> = known
                .keys()
                .filter(|name| !listed.contains(name))
                .cloned()
                .collect();
            for name in gone {
                known.remove(&name);
                if !during.contains(&name) {
                    removed.push(ConfigEvent::CounterRemoved { name });
                }
            }
            // Listed: read above like any new name, and known from now on. Not listed:
            // removed since it was created.
            for name in std::mem::take(&mut told) {
                if !listed.contains(&name) && !during.contains(&name) {
                    removed.push(ConfigEvent::CounterRemoved { name });
                }
            }
            let changes = removed.into_iter().chain(created);
            let first = connection.is_none();
            if first {
                connection = Some(session.connected(tx).await?);
            }
            for change in changes {
                send(tx, StreamItem::Event(change)).await?;
            }
            if let (true, Some(connection)) = (first, connection) {
                send(tx, StreamItem::ReplayComplete { connection }).await?;
            }
            tokio::time::sleep(self.interval).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_listing_pairs_schemas_with_their_errors() {
        let entries = vec![
            ("a.proto".to_owned(), "message A {}".to_owned()),
            ("b.proto.errors".to_owned(), "Type not found".to_owned()),
            (".errors".to_owned(), "b.proto".to_owned()),
            (
                "b.proto".to_owned(),
                "message B { strin x = 1; }".to_owned(),
            ),
        ];
        let mut events = EntryFeed::Schemas.snapshot(entries);
        events.sort_by_key(|e| e.object().map(|(_, name)| name.to_owned()));
        assert_eq!(
            events,
            vec![
                ConfigEvent::SchemaCreated {
                    name: "a.proto".into(),
                    proto: "message A {}".into(),
                    errors: None
                },
                ConfigEvent::SchemaCreated {
                    name: "b.proto".into(),
                    proto: "message B { strin x = 1; }".into(),
                    errors: Some("Type not found".into())
                },
            ]
        );
    }

    #[test]
    fn schema_entry_events_name_the_schema_they_concern() {
        let known: HashSet<String> = ["a.proto".to_owned()].into();
        let feed = EntryFeed::Schemas;
        assert_eq!(feed.object_of("a.proto", &known), Some("a.proto".into()));
        assert_eq!(feed.object_of("n.proto", &known), Some("n.proto".into()));
        assert_eq!(
            feed.object_of("a.proto.errors", &known),
            Some("a.proto".into())
        );
        assert_eq!(feed.object_of("latlng.proto.errors", &known), None);
        assert_eq!(feed.object_of(".errors", &known), None);
        assert_eq!(
            EntryFeed::Tasks.object_of("t.errors", &known),
            Some("t.errors".into())
        );
    }

    #[test]
    fn known_counters_are_read_again_in_turn() {
        let names: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
        // Few: all of them, every poll.
        assert_eq!(recheck_batch(&names, 0, 32), (names.clone(), 0));
        assert_eq!(recheck_batch(&names, 3, 32).0.len(), 5);
        // Many: in turn, wrapping around, each within ceil(n / per_poll) polls.
        assert_eq!(
            recheck_batch(&names, 0, 2),
            (vec!["c0".to_string(), "c1".to_string()], 2)
        );
        assert_eq!(
            recheck_batch(&names, 4, 2),
            (vec!["c4".to_string(), "c0".to_string()], 1)
        );
        let mut seen = HashSet::new();
        let mut cursor = 0;
        for _ in 0..3 {
            let (batch, next) = recheck_batch(&names, cursor, 2);
            seen.extend(batch);
            cursor = next;
        }
        assert_eq!(seen.len(), 5);
        assert_eq!(recheck_batch(&[], 7, 2), (Vec::new(), 0));
    }
}
