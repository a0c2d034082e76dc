//! What a tool call changes in the session besides its result, as data: the tool returns it in
//! its [`Outcome`] and the session applies it (`session/tool_calls.rs`), so no tool reaches into
//! the session and the session never looks at a tool's name to find out.

use crate::protocol::message::ToolOutput;
use crate::protocol::reply::TodoPhase;

/// One change for the session to make.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEffect {
    /// `todo_write`: the todo list is now these phases (`get_state.todoPhases`, the todo widget).
    SetTodos(Vec<TodoPhase>),
    /// `bash`: a command the sandbox denied asked the host to run it at the policy `to`; the
    /// session records it in the audit trail, approved or not.
    Escalated { to: &'static str, approved: bool },
}

/// A call's result, and what the session is to change because of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub output: ToolOutput,
    pub effects: Vec<ToolEffect>,
}

impl From<ToolOutput> for Outcome {
    /// A result with no effect (most calls, and every failed one).
    fn from(output: ToolOutput) -> Outcome {
        Outcome {
            output,
            effects: Vec::new(),
        }
    }
}

impl Outcome {
    /// Key values scrubbed from the result and from what the effects carry, as from any output
    /// the session keeps.
    pub fn scrub(&mut self) {
        crate::secrets::scrub_output(&mut self.output);
        for effect in &mut self.effects {
            match effect {
                ToolEffect::SetTodos(phases) => scrub_todos(phases),
                ToolEffect::Escalated { .. } => {}
            }
        }
    }
}

fn scrub_todos(phases: &mut [TodoPhase]) {
    let secrets = crate::secrets::installed();
    let scrub = |text: &mut String| {
        if let std::borrow::Cow::Owned(clean) = secrets.scrub(text) {
            *text = clean;
        }
    };
    for phase in phases {
        scrub(&mut phase.id);
        scrub(&mut phase.name);
        for task in &mut phase.tasks {
            for text in [&mut task.id, &mut task.content, &mut task.status] {
                scrub(text);
            }
            for text in [&mut task.notes, &mut task.details].into_iter().flatten() {
                scrub(text);
            }
        }
    }
}
