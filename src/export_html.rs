//! `export_html`: a self-contained HTML page of the session. It has no script at all, and every
//! piece of message text is escaped, so content such as `<script>` is shown, never run.

use serde_json::Value;

use crate::protocol::message::{AgentMessage, Content};

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;background:#fafafa}\
.m{border-radius:8px;padding:.6rem .9rem;margin:.8rem 0;background:#fff;border:1px solid #e3e3e6}\
.user{border-left:4px solid #2f6fde}.assistant{border-left:4px solid #2a9d5b}.tool{border-left:4px solid #8a8a8e;font-size:13px}\
.error{border-left:4px solid #d23b3b}.bash{border-left:4px solid #b7791f}.role{font-weight:600;font-size:12px;text-transform:uppercase;color:#6e6e73}\
pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0;font:13px/1.45 ui-monospace,monospace}\
details{color:#555}summary{cursor:pointer}.meta{color:#6e6e73;font-size:12px}";

pub fn render(title: &str, session_id: &str, messages: &[AgentMessage]) -> String {
    let mut body = String::new();
    for m in messages {
        body.push_str(&message(m));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
<title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1><p class=\"meta\">Session {id} · {n} messages</p>\n{body}</body></html>\n",
        t = escape(title),
        id = escape(session_id),
        n = messages.len(),
    )
}

fn message(m: &AgentMessage) -> String {
    match m {
        AgentMessage::User(u) => block("user", "User", &blocks(&u.content)),
        AgentMessage::Assistant(a) => {
            let mut inner = blocks(&a.content);
            if let Some(e) = &a.error_message {
                inner.push_str(&format!(
                    "<p class=\"meta\">{}: {}</p>",
                    escape(&format!("{:?}", a.stop_reason)),
                    escape(e)
                ));
            }
            block(
                "assistant",
                &format!("Assistant · {}/{}", a.provider, a.model),
                &inner,
            )
        }
        AgentMessage::ToolResult(r) => {
            let class = if r.is_error { "tool error" } else { "tool" };
            block(
                class,
                &format!("Tool result · {}", r.tool_name),
                &blocks(&r.content),
            )
        }
        AgentMessage::BashExecution(b) => {
            let status = match (b.cancelled, b.exit_code) {
                (true, _) => "cancelled".to_string(),
                (_, Some(code)) => format!("exit {code}"),
                _ => String::new(),
            };
            block(
                "bash",
                &format!("$ {} {status}", b.command),
                &format!("<pre>{}</pre>", escape(&b.output)),
            )
        }
        AgentMessage::CompactionSummary(c) => block(
            "tool",
            "Compaction summary",
            &format!("<pre>{}</pre>", escape(&c.summary)),
        ),
    }
}

fn block(class: &str, role: &str, inner: &str) -> String {
    format!(
        "<div class=\"m {class}\"><div class=\"role\">{}</div>{inner}</div>\n",
        escape(role)
    )
}

fn blocks(content: &[Content]) -> String {
    let mut out = String::new();
    for c in content {
        match c {
            Content::Text { text, .. } => out.push_str(&format!("<pre>{}</pre>", escape(text))),
            Content::Thinking { thinking, .. } => out.push_str(&format!(
                "<details><summary>Thinking</summary><pre>{}</pre></details>",
                escape(thinking)
            )),
            Content::RedactedThinking { .. } => {
                out.push_str("<p class=\"meta\">(redacted thinking)</p>")
            }
            Content::Image { mime_type, .. } => out.push_str(&format!(
                "<p class=\"meta\">[image {}]</p>",
                escape(mime_type)
            )),
            Content::ToolCall(call) => {
                let args = serde_json::to_string_pretty(&call.arguments)
                    .unwrap_or_else(|_| Value::Null.to_string());
                out.push_str(&format!(
                    "<details open><summary>Tool call · {}</summary><pre>{}</pre></details>",
                    escape(&call.name),
                    escape(&args)
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::UserMessage;

    #[test]
    fn everything_is_escaped_and_there_is_no_script() {
        let m = AgentMessage::User(UserMessage::new("<script>alert('x')</script> & \"q\"", &[]));
        let html = render("<b>t</b>", "id", &[m]);
        assert!(!html.contains("<script"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;")
        );
        assert!(html.contains("<title>&lt;b&gt;t&lt;/b&gt;</title>"));
    }
}
