//! The lock every piece of the engine's bookkeeping sits behind ([`Locked`]).

use std::sync::Mutex;

/// A value shared by the reconciles and watches of one kind's engine, changed one closure at a
/// time. A panic while it was held does not poison it: every step of the bookkeeping leaves it
/// valid, so it stays usable.
#[derive(Debug, Default)]
pub struct Locked<T>(Mutex<T>);

impl<T> Locked<T> {
    pub fn new(value: T) -> Self {
        Self(Mutex::new(value))
    }

    /// Runs `f` on the value, holding the lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        match self.0.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_held_leaves_the_value_usable() {
        let locked = Locked::new(vec![1]);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            locked.with(|v| {
                v.push(2);
                panic!("in the middle");
            })
        }));
        assert!(result.is_err());
        assert_eq!(locked.with(|v| v.clone()), [1, 2]);
    }
}
