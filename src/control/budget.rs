//! Budget accounting for one negotiation: tokens and cost (what the model's requests used,
//! counted live while a reply streams), tool-call units (charged commands and every tool call the
//! model makes) and wall time since the negotiation. The first breach is kept: later charged
//! work is refused with it until the host negotiates again.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::declaration::Budget;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Tokens,
    ToolCalls,
    WallTime,
    Cost,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Tokens => "tokens",
            Metric::ToolCalls => "tool_calls",
            Metric::WallTime => "wall_time",
            Metric::Cost => "cost",
        }
    }
}

/// A limit crossed: what, by how much, and where it was noticed.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    pub metric: Metric,
    pub limit: f64,
    pub observed: f64,
    /// `<command> preflight`, `model stream`, `tool call`, `timer`.
    pub phase: String,
}

/// A number as JSON, without a `.0` on whole values (hosts compare these with the declaration).
pub fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

impl Breach {
    pub fn message(&self) -> String {
        format!(
            "{} budget exceeded at {}: observed {} > limit {}",
            self.metric.as_str(),
            self.phase,
            number(self.observed),
            number(self.limit)
        )
    }
}

#[derive(Debug)]
pub struct Meter {
    pub budget: Budget,
    started: Instant,
    tool_calls: u64,
    /// Usage of model requests that finished since the negotiation.
    tokens: f64,
    cost: f64,
    /// The streaming request's usage so far (an estimate until the provider's count arrives).
    live_tokens: f64,
    live_cost: f64,
    /// The request the live figures belong to.
    live_stream: Option<u64>,
    pub breach: Option<Breach>,
}

/// What has been used and what is left, for `get_state`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Used {
    pub tokens: f64,
    pub tool_calls: f64,
    pub wall_time_ms: f64,
    pub cost_usd: f64,
}

impl Meter {
    pub fn new(budget: Budget) -> Meter {
        Meter {
            budget,
            started: Instant::now(),
            tool_calls: 0,
            tokens: 0.0,
            cost: 0.0,
            live_tokens: 0.0,
            live_cost: 0.0,
            live_stream: None,
            breach: None,
        }
    }

    fn fail(&mut self, metric: Metric, limit: f64, observed: f64, phase: &str) -> Breach {
        let breach = Breach {
            metric,
            limit,
            observed,
            phase: phase.to_string(),
        };
        if self.breach.is_none() {
            self.breach = Some(breach.clone());
        }
        breach
    }

    /// When the wall-time budget runs out (none once breached: the timer has fired).
    pub fn wall_deadline(&self) -> Option<Instant> {
        if self.breach.is_some() {
            return None;
        }
        let limit = Duration::from_secs_f64((self.budget.max_wall_time_ms / 1000.0).min(1.0e9));
        Some(self.started + limit)
    }

    pub fn check_wall(&mut self, phase: &str) -> Result<(), Breach> {
        let elapsed = self.started.elapsed().as_secs_f64() * 1000.0;
        if elapsed > self.budget.max_wall_time_ms {
            let limit = self.budget.max_wall_time_ms;
            return Err(self.fail(Metric::WallTime, limit, elapsed.floor(), phase));
        }
        Ok(())
    }

    /// Takes one tool-call unit; on a breach the unit is not counted.
    pub fn reserve_tool_call(&mut self, phase: &str) -> Result<(), Breach> {
        let next = self.tool_calls + 1;
        if next as f64 > self.budget.max_tool_calls {
            let limit = self.budget.max_tool_calls;
            return Err(self.fail(Metric::ToolCalls, limit, next as f64, phase));
        }
        self.tool_calls = next;
        Ok(())
    }

    /// The streaming request `stream` produced this much more. The estimate of an earlier
    /// request that never reported its count (aborted, cut off) stays counted.
    pub fn live(&mut self, stream: u64, tokens: f64, cost: f64, phase: &str) -> Result<(), Breach> {
        if self.live_stream != Some(stream) {
            self.tokens += self.live_tokens;
            self.cost += self.live_cost;
            self.live_tokens = 0.0;
            self.live_cost = 0.0;
            self.live_stream = Some(stream);
        }
        self.live_tokens += tokens.max(0.0);
        self.live_cost += cost.max(0.0);
        self.check_usage(phase)
    }

    /// A model request finished having used this much; it replaces the live estimate, unless
    /// the estimate is larger (a failed request may report nothing).
    pub fn commit(&mut self, tokens: f64, cost: f64, phase: &str) -> Result<(), Breach> {
        self.tokens += tokens.max(self.live_tokens);
        self.cost += cost.max(self.live_cost);
        self.live_tokens = 0.0;
        self.live_cost = 0.0;
        self.live_stream = None;
        self.check_usage(phase)
    }

    fn check_usage(&mut self, phase: &str) -> Result<(), Breach> {
        let used = self.used();
        if used.tokens > self.budget.max_tokens {
            let limit = self.budget.max_tokens;
            return Err(self.fail(Metric::Tokens, limit, used.tokens, phase));
        }
        if used.cost_usd > self.budget.max_cost_usd {
            let limit = self.budget.max_cost_usd;
            return Err(self.fail(Metric::Cost, limit, used.cost_usd, phase));
        }
        Ok(())
    }

    pub fn used(&self) -> Used {
        Used {
            tokens: self.tokens + self.live_tokens,
            tool_calls: self.tool_calls as f64,
            wall_time_ms: (self.started.elapsed().as_secs_f64() * 1000.0).floor(),
            cost_usd: self.cost + self.live_cost,
        }
    }

    pub fn left(&self) -> Used {
        let u = self.used();
        let b = &self.budget;
        Used {
            tokens: (b.max_tokens - u.tokens).max(0.0),
            tool_calls: (b.max_tool_calls - u.tool_calls).max(0.0),
            wall_time_ms: (b.max_wall_time_ms - u.wall_time_ms).max(0.0),
            cost_usd: (b.max_cost_usd - u.cost_usd).max(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(tokens: f64, calls: f64, wall_ms: f64, cost: f64) -> Budget {
        Budget {
            max_tokens: tokens,
            max_tool_calls: calls,
            max_wall_time_ms: wall_ms,
            max_cost_usd: cost,
            as_sent: Default::default(),
        }
    }

    #[test]
    fn tool_calls_reserve_until_the_limit() {
        let mut m = Meter::new(budget(100.0, 2.0, 60_000.0, 1.0));
        assert!(m.reserve_tool_call("a").is_ok());
        assert!(m.reserve_tool_call("b").is_ok());
        let b = m.reserve_tool_call("bash preflight").unwrap_err();
        assert_eq!(
            (b.metric, b.limit, b.observed),
            (Metric::ToolCalls, 2.0, 3.0)
        );
        assert_eq!(m.used().tool_calls, 2.0, "the refused unit is not counted");
        assert_eq!(m.breach.as_ref().unwrap().phase, "bash preflight");
    }

    #[test]
    fn live_usage_is_replaced_by_the_final_count() {
        let mut m = Meter::new(budget(100.0, 5.0, 60_000.0, 1.0));
        m.live(1, 40.0, 0.0, "model stream").unwrap();
        m.live(1, 20.0, 0.0, "model stream").unwrap();
        assert_eq!(m.used().tokens, 60.0);
        m.commit(50.0, 0.25, "model stream").unwrap();
        assert_eq!(m.used().tokens, 60.0, "the larger of estimate and count");
        let mut m = Meter::new(budget(100.0, 5.0, 60_000.0, 1.0));
        m.live(1, 10.0, 0.0, "model stream").unwrap();
        m.commit(50.0, 0.25, "model stream").unwrap();
        assert_eq!(m.used().tokens, 50.0);
        assert_eq!(m.left().tokens, 50.0);
        // An aborted stream's estimate stays when the next one starts.
        m.live(2, 10.0, 0.0, "model stream").unwrap();
        m.live(3, 5.0, 0.0, "model stream").unwrap();
        assert_eq!(m.used().tokens, 65.0);
        let b = m.live(3, 36.0, 0.0, "model stream").unwrap_err();
        assert_eq!((b.metric, b.observed), (Metric::Tokens, 101.0));
        let mut m = Meter::new(budget(1000.0, 5.0, 60_000.0, 0.1));
        let b = m.commit(10.0, 0.2, "x").unwrap_err();
        assert_eq!(b.metric, Metric::Cost);
        assert_eq!(
            b.message(),
            "cost budget exceeded at x: observed 0.2 > limit 0.1"
        );
    }

    #[test]
    fn wall_time_runs_out() {
        let mut m = Meter::new(budget(100.0, 5.0, 1.0, 1.0));
        std::thread::sleep(Duration::from_millis(5));
        let b = m.check_wall("timer").unwrap_err();
        assert_eq!(b.metric, Metric::WallTime);
        assert!(m.wall_deadline().is_none(), "no timer after the breach");
        assert_eq!(number(3.0), json!(3));
        assert_eq!(number(0.5), json!(0.5));
    }
}
