#!/usr/bin/env python3
"""faster-whisper's transcripts of espeak-ng speech in Hearth's five languages (opt-in check).

Usage: python3 scripts/whisper-reference.py MODEL_DIR OUT_DIR
  MODEL_DIR: the real whisper base folder (scripts/whisper-model.sh prints it)
  OUT_DIR:   gets <lang>.f32 (16 kHz mono little-endian f32, as faster-whisper decoded and
             resampled espeak-ng's WAV) and faster_whisper.json

Needs espeak-ng and a Python with faster-whisper (pip install faster-whisper: its CPU
ctranslate2 wheels). faster-whisper runs as the issue asks: beam 1, no VAD, no temperature
fallback, no timestamps, no conditioning on earlier text, float32 compute. Each clip is run
twice: padded with silence to 30 s (then faster-whisper's features equal transformers' and
Hearth's, which pad the samples, not the log-mel frames as faster-whisper does) and as it is;
and once with the language left to detection.
crates/engine/tests/whisper_real.rs (ignored; HEARTH_WHISPER_SPEECH=OUT_DIR) compares Hearth.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio

SPEECH = {
    "en": ("en-us", "The quick brown fox jumps over the lazy dog. My computer keeps every "
                    "word I say on this machine."),
    "de": ("de", "Guten Morgen. Das Wetter ist heute schön, und wir gehen in den Park."),
    "fr": ("fr", "Bonjour. Aujourd'hui il fait beau, et nous allons au parc."),
    "es": ("es", "Buenos días. Hoy hace buen tiempo y vamos al parque."),
    "zh": ("cmn", "今天天气很好，我们去公园散步。"),
}
OPTIONS = dict(beam_size=1, best_of=1, temperature=0.0, vad_filter=False,
               without_timestamps=True, condition_on_previous_text=False)


def run(model, audio, language):
    segments, info = model.transcribe(audio, language=language, **OPTIONS)
    return "".join(s.text for s in segments).strip(), info.language


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    results = {}
    for lang, (voice, text) in SPEECH.items():
        with tempfile.TemporaryDirectory() as tmp:
            wav = os.path.join(tmp, "speech.wav")
            subprocess.run(["espeak-ng", "-v", voice, "-w", wav, text], check=True)
            audio = decode_audio(wav, sampling_rate=16000).astype(np.float32)
        audio.tofile(os.path.join(out, f"{lang}.f32"))
        padded = np.zeros(max(480000, len(audio)), dtype=np.float32)
        padded[: len(audio)] = audio
        results[lang] = {
            "spoken": text,
            "seconds": len(audio) / 16000,
            "padded": run(model, padded, lang)[0],
            "as_is": run(model, audio, lang)[0],
            "detected": run(model, padded, None)[1],
        }
        print(lang, results[lang], file=sys.stderr)
    json.dump(results, open(os.path.join(out, "faster_whisper.json"), "w"), ensure_ascii=False,
              indent=1)


if __name__ == "__main__":
    main()
