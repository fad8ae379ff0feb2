//! Scoring texts by what the model would say next: the logits of a few tokens at the last
//! position of each prompt (a reranker asks for "yes" and "no"), prompts sharing a prefix
//! computing it once. The conversation the model was in is kept (see `runner::scoring`).

use std::ops::ControlFlow;

use crate::{Error, Model};

impl Model {
    /// For each of `prompts` (token ids, e.g. from [`crate::TextTokenizer::encode_prompt`]), the
    /// logits of `ids` at its last position, as a pass of that prompt alone from an empty
    /// context computes them. `after_each` is told how many prompts are done and can stop
    /// early; the logits of the prompts done are returned. Refused, before any work, when a
    /// prompt is empty or longer than the context, or an id is outside the vocabulary.
    pub fn last_logits_of(
        &mut self,
        prompts: &[Vec<u32>],
        ids: &[u32],
        after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Vec<Vec<f32>>, Error> {
        self.runner.last_logits_of(prompts, ids, after_each)
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::path::Path;

    use crate::{LoadOptions, Model};

    fn tiny_qwen3() -> Model {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
        Model::load(&dir, &LoadOptions::default()).unwrap()
    }

    #[test]
    fn scored_prompts_sharing_a_prefix_match_their_full_logits_and_can_stop() {
        let mut model = tiny_qwen3();
        let prompts = vec![
            vec![5, 6, 7, 8, 9],
            vec![5, 6, 7, 20, 21, 22],
            vec![5, 6, 7, 8, 9],
            vec![30],
        ];
        let ids = [1, 17, 42];
        let scored = model
            .last_logits_of(&prompts, &ids, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        for (prompt, got) in prompts.iter().zip(&scored) {
            let full = model.logits(prompt).unwrap();
            let last = full.last().unwrap();
            let want: Vec<f32> = ids.iter().map(|&id| last[id as usize]).collect();
            assert_eq!(got, &want, "{prompt:?}");
        }
        let mut seen = Vec::new();
        let two = model
            .last_logits_of(&prompts, &ids, &mut |done| {
                seen.push(done);
                if done == 2 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!(two, scored[..2]);
        assert_eq!(seen, [1, 2]);
    }

    #[test]
    fn bad_prompts_and_ids_are_refused_before_any_work() {
        let mut model = tiny_qwen3();
        let vocab = model.config().vocab_size as u32;
        let keep = &mut |_| ControlFlow::Continue(());
        assert!(model
            .last_logits_of(&[vec![1], vec![]], &[1], keep)
            .is_err());
        assert!(model.last_logits_of(&[vec![vocab]], &[1], keep).is_err());
        assert!(model.last_logits_of(&[vec![1]], &[vocab], keep).is_err());
        let long = vec![1; model.info().context_length + 1];
        assert!(model.last_logits_of(&[long], &[1], keep).is_err());
    }
}
