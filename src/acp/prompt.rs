//! `session/prompt`: the client's content blocks become one `prompt` command of the session (text,
//! images, resources as tagged context, `/name` expanded to a workflow stage or a skill).

use std::io::Write;

use agent_client_protocol_schema::v1::{
    ContentBlock, EmbeddedResourceResource, Error, PromptRequest, RequestId,
};
use serde_json::{json, Value};

use super::front::{busy, Front, Turn, Waiting};

impl<W: Write> Front<W> {
    pub(super) fn prompt(&mut self, id: RequestId, p: PromptRequest) -> std::io::Result<()> {
        if let Some(e) = self.not_served(&p.session_id) {
            return self.wire.respond::<()>(id, Err(e));
        }
        if self.c.turn.is_some() {
            return self.wire.respond::<()>(id, Err(busy()));
        }
        let (message, images) = match prompt_text(&p.prompt) {
            Ok((text, images)) => (super::commands::expand(&text, &self.c.skills), images),
            Err(e) => return self.wire.respond::<()>(id, Err(e)),
        };
        self.c.turn = Some(Turn::new(id));
        self.command(
            "prompt",
            json!({"message": message, "images": images}),
            Waiting::Prompt,
        );
        Ok(())
    }
}

/// The prompt's text and images. Embedded resources are given to the model as tagged context,
/// resource links as a mention of the resource.
fn prompt_text(blocks: &[ContentBlock]) -> Result<(String, Vec<Value>), Error> {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => push_paragraph(&mut text, &t.text),
            ContentBlock::Image(i) => {
                images.push(json!({"type": "image", "data": i.data, "mimeType": i.mime_type}))
            }
            ContentBlock::ResourceLink(link) => {
                push_paragraph(&mut text, &format!("@{}", link.uri));
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(r) => push_paragraph(
                    &mut text,
                    &format!("<context uri=\"{}\">\n{}\n</context>", r.uri, r.text),
                ),
                _ => {
                    return Err(Error::invalid_params().data(
                        "binary embedded resources are not supported; send text or an image",
                    ))
                }
            },
            _ => {
                return Err(Error::invalid_params()
                    .data("audio prompts are not supported (promptCapabilities.audio is false)"))
            }
        }
    }
    Ok((text, images))
}

fn push_paragraph(text: &mut String, part: &str) {
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(part);
}
