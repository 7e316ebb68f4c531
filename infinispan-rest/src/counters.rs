//! Counters: list, configuration, value, create (strong/weak, every option), delete, and the
//! value operations (increment, decrement, add, reset, compare-and-set/swap, get-and-set).
//! There is no configuration update: delete and re-create (which loses the value).
//!
//! Value operations as measured on 16.0.7 (`POST /rest/v2/counters/{n}?action=...`):
//! - strong counters answer 200 with the value as a JSON number; weak counters answer
//!   `increment`/`decrement`/`add` with 204 and no value (weak counters are not read back
//!   atomically), so those calls return `None` for them;
//! - `reset` -> 204 (back to the initial value), both kinds;
//! - `compareAndSet`, `compareAndSwap`, `getAndSet` exist for strong counters only; on a weak
//!   counter -> 500 `ISPN029514: Invalid counter type` ([`Error::Rejected`]);
//! - crossing a bound of a bounded strong counter -> 500 `ISPN029501: Upper|Lower bound
//!   reached.` ([`Error::Rejected`], code `ISPN029501`). `add`/`increment`/`decrement` then
//!   **leave the counter at the bound**; `compareAndSet`/`getAndSet` leave it unchanged;
//! - an unbounded strong counter saturates at `i64::MAX`/`i64::MIN` (no error, no wrap);
//! - unknown counter -> 404 ([`Error::NotFound`]).

use http::Method;
use serde_json::{Map, Value, json};

use crate::client::{Client, Req};
use crate::error::{Error, from_response};
use crate::names::encode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CounterStorage {
    #[default]
    Volatile,
    Persistent,
}

impl CounterStorage {
    fn as_str(self) -> &'static str {
        match self {
            CounterStorage::Volatile => "VOLATILE",
            CounterStorage::Persistent => "PERSISTENT",
        }
    }
}

/// A counter's definition, as created and as read back. Absent options are `None` (the
/// server's "no lifespan" `-1` reads back as `None`, and so does a bound at `i64::MIN` or
/// `i64::MAX`, which the server writes for the side a one-sided counter leaves open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterConfig {
    Strong {
        initial_value: i64,
        storage: CounterStorage,
        lower_bound: Option<i64>,
        upper_bound: Option<i64>,
        /// Milliseconds.
        lifespan: Option<i64>,
    },
    Weak {
        initial_value: i64,
        storage: CounterStorage,
        concurrency_level: Option<u32>,
    },
}

impl CounterConfig {
    /// The JSON body the server expects on create.
    pub fn to_json(&self) -> Value {
        match self {
            CounterConfig::Strong {
                initial_value,
                storage,
                lower_bound,
                upper_bound,
                lifespan,
            } => {
                let mut m = Map::new();
                m.insert("initial-value".into(), json!(initial_value));
                m.insert("storage".into(), json!(storage.as_str()));
                if let Some(v) = lower_bound {
                    m.insert("lower-bound".into(), json!(v));
                }
                if let Some(v) = upper_bound {
                    m.insert("upper-bound".into(), json!(v));
                }
                if let Some(v) = lifespan {
                    m.insert("lifespan".into(), json!(v));
                }
                json!({ "strong-counter": m })
            }
            CounterConfig::Weak {
                initial_value,
                storage,
                concurrency_level,
            } => {
                let mut m = Map::new();
                m.insert("initial-value".into(), json!(initial_value));
                m.insert("storage".into(), json!(storage.as_str()));
                if let Some(v) = concurrency_level {
                    m.insert("concurrency-level".into(), json!(v));
                }
                json!({ "weak-counter": m })
            }
        }
    }

    /// Parses the server's JSON (`GET .../config`, or a 16.2 counter event). The server writes
    /// numbers as strings (`"initial-value":"5"`); both are accepted.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        fn num(m: &Map<String, Value>, k: &str) -> Result<Option<i64>, String> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => n.as_i64().map(Some).ok_or(format!("{k}: {n}")),
                Some(Value::String(s)) => s.parse().map(Some).map_err(|e| format!("{k}: {e}")),
                Some(o) => Err(format!("{k}: unexpected {o}")),
            }
        }
        fn storage(m: &Map<String, Value>) -> Result<CounterStorage, String> {
            match m.get("storage").and_then(Value::as_str) {
                None => Ok(CounterStorage::Volatile),
                Some(s) if s.eq_ignore_ascii_case("volatile") => Ok(CounterStorage::Volatile),
                Some(s) if s.eq_ignore_ascii_case("persistent") => Ok(CounterStorage::Persistent),
                Some(s) => Err(format!("storage: {s}")),
            }
        }
        if let Some(m) = v.get("strong-counter").and_then(Value::as_object) {
            Ok(CounterConfig::Strong {
                initial_value: num(m, "initial-value")?.unwrap_or(0),
                storage: storage(m)?,
                // A strong counter bounded on one side reads back with the other bound at
                // the i64 extreme: the same as unbounded on that side.
                lower_bound: num(m, "lower-bound")?.filter(|b| *b != i64::MIN),
                upper_bound: num(m, "upper-bound")?.filter(|b| *b != i64::MAX),
                lifespan: num(m, "lifespan")?.filter(|l| *l >= 0),
            })
        } else if let Some(m) = v.get("weak-counter").and_then(Value::as_object) {
            Ok(CounterConfig::Weak {
                initial_value: num(m, "initial-value")?.unwrap_or(0),
                storage: storage(m)?,
                concurrency_level: num(m, "concurrency-level")?
                    .map(|c| u32::try_from(c).map_err(|e| format!("concurrency-level: {e}")))
                    .transpose()?,
            })
        } else {
            Err(format!("neither strong-counter nor weak-counter: {v}"))
        }
    }
}

fn counter_path(name: &str) -> String {
    format!("/rest/v2/counters/{}", encode(name))
}

impl Client {
    /// Names of every counter, statically declared ones included.
    pub async fn list_counters(&self) -> Result<Vec<String>, Error> {
        let what = "list counters";
        self.expect(Req::get("/rest/v2/counters"), what, &[200])
            .await?
            .json(what)
    }

    pub async fn counter_config(&self, name: &str) -> Result<CounterConfig, Error> {
        let what = format!("read counter '{name}'");
        let v: Value = self
            .expect(
                Req::get(format!("{}/config", counter_path(name))),
                &what,
                &[200],
            )
            .await?
            .json(&what)?;
        CounterConfig::from_json(&v).map_err(|e| Error::decode(&what, e))
    }

    /// The current value (the server only serves text/plain here).
    pub async fn counter_value(&self, name: &str) -> Result<i64, Error> {
        let what = format!("read the value of counter '{name}'");
        let r = self
            .expect(
                Req::get(counter_path(name)).accept("text/plain"),
                &what,
                &[200],
            )
            .await?;
        r.text().trim().parse().map_err(|e| Error::decode(&what, e))
    }

    /// Creates a counter; [`Error::AlreadyExists`] (the server's 304) if the name is taken,
    /// whatever its definition.
    pub async fn create_counter(&self, name: &str, config: &CounterConfig) -> Result<(), Error> {
        let what = format!("create counter '{name}'");
        let r = self
            .call(
                Req::new(Method::POST, counter_path(name))
                    .body("application/json", config.to_json().to_string()),
                &what,
            )
            .await?;
        match r.status.as_u16() {
            200 | 201 | 204 => Ok(()),
            304 => Err(Error::AlreadyExists { what }),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    /// One value operation: `POST .../{name}?action=<action>&<params>`; the answer's status
    /// and body (a JSON number or `true`/`false` for strong counters, empty for 204).
    async fn counter_action(
        &self,
        name: &str,
        action: &str,
        params: &[(&str, i64)],
        what: &str,
    ) -> Result<Option<String>, Error> {
        let mut path = format!("{}?action={action}", counter_path(name));
        for (k, v) in params {
            path.push_str(&format!("&{k}={v}"));
        }
        let r = self
            .expect(
                Req::new(Method::POST, path).accept("application/json"),
                what,
                &[200, 204],
            )
            .await?;
        Ok((r.status.as_u16() == 200).then(|| r.text().trim().to_owned()))
    }

    /// An operation answering the new or previous value (strong) or nothing (weak: 204).
    async fn counter_value_action(
        &self,
        name: &str,
        action: &str,
        params: &[(&str, i64)],
        what: &str,
    ) -> Result<Option<i64>, Error> {
        self.counter_action(name, action, params, what)
            .await?
            .map(|t| t.parse().map_err(|e| Error::decode(what, e)))
            .transpose()
    }

    /// Adds 1. Returns the new value for a strong counter, `None` for a weak one.
    pub async fn counter_increment(&self, name: &str) -> Result<Option<i64>, Error> {
        let what = format!("increment counter '{name}'");
        self.counter_value_action(name, "increment", &[], &what)
            .await
    }

    /// Subtracts 1. Returns the new value for a strong counter, `None` for a weak one.
    pub async fn counter_decrement(&self, name: &str) -> Result<Option<i64>, Error> {
        let what = format!("decrement counter '{name}'");
        self.counter_value_action(name, "decrement", &[], &what)
            .await
    }

    /// Adds `delta` (may be negative). Returns the new value for a strong counter, `None` for a
    /// weak one. Crossing a bound is [`Error::Rejected`] (`ISPN029501`) and leaves the counter
    /// at the bound.
    pub async fn counter_add(&self, name: &str, delta: i64) -> Result<Option<i64>, Error> {
        let what = format!("add {delta} to counter '{name}'");
        self.counter_value_action(name, "add", &[("delta", delta)], &what)
            .await
    }

    /// Sets the counter back to its initial value.
    pub async fn counter_reset(&self, name: &str) -> Result<(), Error> {
        let what = format!("reset counter '{name}'");
        self.counter_action(name, "reset", &[], &what)
            .await
            .map(|_| ())
    }

    /// Strong counters: sets `update` if the value is `expect`; true when it did.
    pub async fn counter_compare_and_set(
        &self,
        name: &str,
        expect: i64,
        update: i64,
    ) -> Result<bool, Error> {
        let what = format!("compare-and-set counter '{name}'");
        match self
            .counter_action(
                name,
                "compareAndSet",
                &[("expect", expect), ("update", update)],
                &what,
            )
            .await?
            .as_deref()
        {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            other => Err(Error::decode(&what, format!("{other:?}"))),
        }
    }

    /// Strong counters: sets `update` if the value is `expect`; returns the value before
    /// (equal to `expect` when the swap happened).
    pub async fn counter_compare_and_swap(
        &self,
        name: &str,
        expect: i64,
        update: i64,
    ) -> Result<i64, Error> {
        let what = format!("compare-and-swap counter '{name}'");
        self.counter_value_action(
            name,
            "compareAndSwap",
            &[("expect", expect), ("update", update)],
            &what,
        )
        .await?
        .ok_or_else(|| Error::decode(&what, "no value in the answer"))
    }

    /// Strong counters: sets `value`; returns the value before.
    pub async fn counter_get_and_set(&self, name: &str, value: i64) -> Result<i64, Error> {
        let what = format!("get-and-set counter '{name}'");
        self.counter_value_action(name, "getAndSet", &[("value", value)], &what)
            .await?
            .ok_or_else(|| Error::decode(&what, "no value in the answer"))
    }

    /// Deletes a counter and its definition.
    pub async fn delete_counter(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete counter '{name}'");
        self.delete(counter_path(name), &what, &[200, 204]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_servers_string_numbers() {
        let server = json!({"strong-counter":{"initial-value":"5","storage":"VOLATILE","lower-bound":"0","upper-bound":"100","lifespan":"-1"}});
        let c = CounterConfig::from_json(&server);
        assert_eq!(
            c,
            Ok(CounterConfig::Strong {
                initial_value: 5,
                storage: CounterStorage::Volatile,
                lower_bound: Some(0),
                upper_bound: Some(100),
                lifespan: None,
            })
        );
        let w = CounterConfig::Weak {
            initial_value: -3,
            storage: CounterStorage::Persistent,
            concurrency_level: Some(4),
        };
        assert_eq!(CounterConfig::from_json(&w.to_json()), Ok(w));
        assert!(CounterConfig::from_json(&json!({"x":{}})).is_err());
    }
}
