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

/// What the streaming request has used so far: the provider's report (when it sends one while
/// streaming) plus an estimate of the output streamed beyond what it reported.
#[derive(Debug, Default, Clone, Copy)]
struct Live {
    stream: u64,
    estimated_output: f64,
    reported_total: f64,
    reported_output: f64,
    reported_cost: f64,
    /// USD per output token, to price the estimate.
    output_price: f64,
}

impl Live {
    fn beyond_report(&self) -> f64 {
        (self.estimated_output - self.reported_output).max(0.0)
    }

    fn tokens(&self) -> f64 {
        self.reported_total + self.beyond_report()
    }

    fn cost(&self) -> f64 {
        self.reported_cost + self.beyond_report() * self.output_price
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
    live: Option<Live>,
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
            live: None,
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

    /// The live figures of request `stream`. What an earlier request used and never reported at
    /// its end (aborted, cut off) stays counted.
    fn live_of(&mut self, stream: u64) -> &mut Live {
        if self.live.is_some_and(|l| l.stream != stream) {
            self.settle_live();
        }
        self.live.get_or_insert(Live {
            stream,
            ..Live::default()
        })
    }

    fn settle_live(&mut self) {
        if let Some(l) = self.live.take() {
            self.tokens += l.tokens();
            self.cost += l.cost();
        }
    }

    /// Request `stream` streamed about `tokens` more output tokens, at `price` USD each.
    pub fn stream_output(&mut self, stream: u64, tokens: f64, price: f64) -> Result<(), Breach> {
        let live = self.live_of(stream);
        live.estimated_output += tokens.max(0.0);
        live.output_price = price.max(0.0);
        self.check_usage("model stream")
    }

    /// The provider reported request `stream`'s usage so far (cumulative).
    pub fn stream_report(
        &mut self,
        stream: u64,
        total: f64,
        output: f64,
        cost: f64,
    ) -> Result<(), Breach> {
        let live = self.live_of(stream);
        live.reported_total = total.max(0.0);
        live.reported_output = output.max(0.0);
        live.reported_cost = cost.max(0.0);
        self.check_usage("model stream")
    }

    /// A model request finished having used this much; it replaces the live figures, unless
    /// they are larger (a failed request may report nothing).
    pub fn commit(&mut self, tokens: f64, cost: f64, phase: &str) -> Result<(), Breach> {
        let live = self.live.take().unwrap_or_default();
        self.tokens += tokens.max(live.tokens());
        self.cost += cost.max(live.cost());
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
        let live = self.live.unwrap_or_default();
        Used {
            tokens: self.tokens + live.tokens(),
            tool_calls: self.tool_calls as f64,
            wall_time_ms: (self.started.elapsed().as_secs_f64() * 1000.0).floor(),
            cost_usd: self.cost + live.cost(),
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
        m.stream_output(1, 40.0, 0.0).unwrap();
        m.stream_output(1, 20.0, 0.0).unwrap();
        assert_eq!(m.used().tokens, 60.0);
        m.commit(50.0, 0.25, "model stream").unwrap();
        assert_eq!(m.used().tokens, 60.0, "the larger of estimate and count");
        let mut m = Meter::new(budget(100.0, 5.0, 60_000.0, 1.0));
        m.stream_output(1, 10.0, 0.0).unwrap();
        m.commit(50.0, 0.25, "model stream").unwrap();
        assert_eq!(m.used().tokens, 50.0);
        assert_eq!(m.left().tokens, 50.0);
        // An aborted stream's figures stay when the next one starts.
        m.stream_output(2, 10.0, 0.0).unwrap();
        m.stream_output(3, 5.0, 0.0).unwrap();
        assert_eq!(m.used().tokens, 65.0);
        let b = m.stream_output(3, 36.0, 0.0).unwrap_err();
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
    fn reports_and_estimates_combine() {
        let mut m = Meter::new(budget(10_000.0, 5.0, 60_000.0, 1.0));
        // Input reported at the start, output estimated as it streams, then reported.
        m.stream_report(1, 1001.0, 1.0, 0.003).unwrap();
        m.stream_output(1, 50.0, 0.00001).unwrap();
        assert_eq!(m.used().tokens, 1050.0);
        assert!((m.used().cost_usd - (0.003 + 49.0 * 0.00001)).abs() < 1e-12);
        m.stream_report(1, 1080.0, 80.0, 0.004).unwrap();
        assert_eq!(m.used().tokens, 1080.0, "the report covers the estimate");
        let b = m.stream_report(1, 20_000.0, 80.0, 0.004).unwrap_err();
        assert_eq!(
            (b.metric, b.phase.as_str()),
            (Metric::Tokens, "model stream")
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
