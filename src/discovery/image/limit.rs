//! Politeness towards one registry: a token bucket (requests per second, bursts of up to
//! one second's worth) and a bound on requests in flight.
//!
//! Owns waiting. Does not know what a request is: `registry` takes a [`Permit`] before
//! every HTTP request it sends to that registry (token-service requests included).

use std::sync::Mutex;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::{Duration, Instant};

/// The limits of one registry, shared by every warehouse that uses it.
#[derive(Debug)]
pub(crate) struct RegistryLimit {
    bucket: Mutex<Bucket>,
    rate: f64,
    in_flight: Semaphore,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// Held while one request is in flight.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    _in_flight: SemaphorePermit<'a>,
}

impl RegistryLimit {
    /// At most `per_second` requests per second (at least 1) and `concurrency` in flight.
    pub(crate) fn new(per_second: u32, concurrency: usize) -> Self {
        let rate = f64::from(per_second.max(1));
        Self {
            bucket: Mutex::new(Bucket {
                tokens: rate,
                refilled: Instant::now(),
            }),
            rate,
            in_flight: Semaphore::new(concurrency.max(1)),
        }
    }

    /// Wait for a free slot and a token.
    pub(crate) async fn acquire(&self) -> Permit<'_> {
        // The semaphore is never closed, so `acquire` cannot fail.
        let in_flight = self
            .in_flight
            .acquire()
            .await
            .unwrap_or_else(|_| unreachable!());
        while let Some(wait) = self.take_token(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        Permit {
            _in_flight: in_flight,
        }
    }

    /// Take a token at `now`, or say how long until one is available.
    fn take_token(&self, now: Instant) -> Option<Duration> {
        let mut bucket = self
            .bucket
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.rate);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let limit = RegistryLimit::new(10, 4);
        let start = limit.bucket.lock().unwrap().refilled;
        for _ in 0..10 {
            assert_eq!(
                limit.take_token(start),
                None,
                "the first second's worth is a burst"
            );
        }
        let wait = limit.take_token(start).unwrap();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        let later = start + Duration::from_millis(100);
        assert_eq!(limit.take_token(later), None, "a token per 1/rate seconds");
        assert!(limit.take_token(later).is_some());
        let much_later = later + Duration::from_secs(60);
        for _ in 0..10 {
            assert_eq!(limit.take_token(much_later), None);
        }
        assert!(
            limit.take_token(much_later).is_some(),
            "idle time does not pile up tokens"
        );
    }

    #[tokio::test]
    async fn bounds_requests_in_flight() {
        let limit = RegistryLimit::new(1000, 2);
        let a = limit.acquire().await;
        let _b = limit.acquire().await;
        assert!(limit.in_flight.try_acquire().is_err());
        drop(a);
        assert!(limit.in_flight.try_acquire().is_ok());
    }
}
