#!/usr/bin/python3
"""Trains the small ternary model of models/ (BitNet b1.58 quantization-aware training).

The architecture is MODEL.md's bitnet forward pass (LLaMA plus inner_attn_ln and
ffn_layernorm, RoPE with rotate_half, tied float lm_head) at a small shape with head_dim 96.
Every BitLinear quantizes in the forward pass exactly as the checkpoint's modeling code:
weights per tensor to {-1, 0, 1} * mean|W| (absmean), activations per token to INT8 by
absmax, both with round-half-even, and a straight-through estimator for the gradients.

Data: the corpus of tools/make_corpus.py (train/valid/test.txt) and a SentencePiece model
trained on train.txt (spm_train; the command is in models/README.md). Each split is encoded
as one string, as `bitsim eval` encodes its text. A training sample is BOS followed by 255
consecutive tokens at a random offset of the training stream; the loss is the next-token
cross entropy of all 256 positions (the targets are the 256 tokens after BOS). Validation
uses `bitsim eval`'s windows: the split's tokens in consecutive chunks of 256, each chunk
scored as [BOS, chunk[:-1]] -> chunk.

    tools/train_model.py --data DIR --out models/kjv-ternary --hidden 192 --layers 4 --ffn 512 --steps 900 --seed 1

Long context (models/kjv-long): --window 2048 sets max_position_embeddings and the length of
the training samples (BOS + 2,047 consecutive tokens of the training stream); --short-window W
--short-steps N trains the first N steps on samples of W positions instead, with the batch
scaled by window / W so that every step sees the same number of tokens; --heads sets the
number of attention heads (default hidden / 96, head_dim 96); --kv-heads the K/V heads
(num_key_value_heads, default the heads: grouped-query attention when fewer, each K/V head
serving heads / kv-heads consecutive query heads, k_proj and v_proj of kv-heads x 96 rows,
models/kjv-gqa); --log-prefix names the files
written beside OUT (PREFIX + train_log.csv, loss_curve.png, training.json), so that a second
model does not overwrite the first one's.

writes OUT/config.json, OUT/model.safetensors (F16 latent weights), OUT/tokenizer.model and,
beside OUT, the training log (train_log.csv), the loss curve (loss_curve.png) and
training.json (command, seed, shape, step count, time, final validation loss of the saved
F16 weights). A fixed step count, not a time budget, so the run is reproducible.

Needs Debian's PyTorch and friends:
    apt-get install -y python3-torch libopenblas0-pthread python3-sentencepiece python3-numpy python3-matplotlib
"""
import argparse
import csv
import hashlib
import json
import math
import os
import shutil
import struct
import sys
import time

# OpenMP threads that sleep instead of spinning while they wait: on a 2-core machine shared
# with other jobs, spinning threads made a training step several times slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

MISSING = []
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    MISSING.append("python3-torch python3-numpy")
try:
    import sentencepiece as spm
except ImportError:
    MISSING.append("python3-sentencepiece")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    MISSING.append("python3-matplotlib")

BOS = 1


# ---------------------------------------------------------------- quantization (MODEL.md)
def weight_quant(w):
    s = 1.0 / w.abs().mean().clamp(min=1e-5)
    return (w * s).round().clamp(-1, 1) / s  # torch.round is round-half-even


def activation_quant(x):
    s = 127.0 / x.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
    return (x * s).round().clamp(-128, 127) / s


class _STE(torch.autograd.Function):
    """Forward: the quantizer; backward: the identity (straight-through estimator). The same
    gradients as x + (q(x) - x).detach(), with fewer full-size temporaries."""

    @staticmethod
    def forward(ctx, x, quant):
        with torch.no_grad():
            return quant(x)

    @staticmethod
    def backward(ctx, g):
        return g, None


class BitLinear(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_out, n_in))
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, xq):
        """xq: the input already through activation_quant (q/k/v and gate/up share one)."""
        return F.linear(xq, _STE.apply(self.weight, weight_quant))


def quant_input(x):
    return _STE.apply(x, activation_quant)


class RMSNorm(torch.nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, theta, n):
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f, eps = c["hidden_size"], c["intermediate_size"], c["rms_norm_eps"]
        self.n_heads = c["num_attention_heads"]
        self.n_kv_heads = c["num_key_value_heads"]
        kv = d // self.n_heads * self.n_kv_heads  # k_proj, v_proj rows: kv_heads x head_dim
        self.input_layernorm = RMSNorm(d, eps)
        # Created (and initialized from the RNG) in this order: q, k, v, o.
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            BitLinear(d, n) for n in (d, kv, kv, d))
        self.inner_attn_ln = RMSNorm(d, eps)
        self.post_attention_layernorm = RMSNorm(d, eps)
        self.gate_proj, self.up_proj = BitLinear(d, f), BitLinear(d, f)
        self.down_proj = BitLinear(f, d)
        self.ffn_layernorm = RMSNorm(f, eps)

    def forward(self, h, cos, sin, mask):
        B, T, D = h.shape
        H, KV = self.n_heads, self.n_kv_heads
        hd = D // H
        a = quant_input(self.input_layernorm(h))
        q = self.q_proj(a).view(B, T, H, hd).transpose(1, 2)
        k, v = (p(a).view(B, T, KV, hd).transpose(1, 2) for p in (self.k_proj, self.v_proj))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if KV != H:
            # Grouped-query attention (HF repeat_kv): K/V head g serves the H / KV consecutive
            # query heads g * (H / KV) .. (g + 1) * (H / KV) - 1, i.e. query head i reads
            # K/V head i // (H / KV), as bitsim's references do (ModelConfig::kv_head).
            k, v = (t.repeat_interleave(H // KV, dim=1) for t in (k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        h = h + self.o_proj(quant_input(self.inner_attn_ln(o)))
        a = quant_input(self.post_attention_layernorm(h))
        g = F.silu(self.gate_proj(a)) * self.up_proj(a)
        return h + self.down_proj(quant_input(self.ffn_layernorm(g)))


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        torch.nn.init.normal_(self.embed_tokens.weight, std=0.02)
        self.layers = torch.nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        hd = c["hidden_size"] // c["num_attention_heads"]
        cos, sin = rope_tables(hd, c["rope_theta"], c["max_position_embeddings"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        mask = torch.full((T, T), float("-inf")).triu(1)
        h = self.embed_tokens(ids)
        cos, sin = self.cos[:T], self.sin[:T]
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return F.linear(self.norm(h), self.embed_tokens.weight)  # tied float lm_head

    def tensors(self):
        """The checkpoint's tensor names (MODEL.md) -> parameters."""
        out = {"model.embed_tokens.weight": self.embed_tokens.weight, "model.norm.weight": self.norm.weight}
        for i, l in enumerate(self.layers):
            p = f"model.layers.{i}."
            out[p + "input_layernorm.weight"] = l.input_layernorm.weight
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[p + f"self_attn.{n}.weight"] = getattr(l, n).weight
            out[p + "self_attn.inner_attn_ln.weight"] = l.inner_attn_ln.weight
            out[p + "post_attention_layernorm.weight"] = l.post_attention_layernorm.weight
            for n in ("gate_proj", "up_proj", "down_proj"):
                out[p + f"mlp.{n}.weight"] = getattr(l, n).weight
            out[p + "mlp.ffn_layernorm.weight"] = l.ffn_layernorm.weight
        return out


# ---------------------------------------------------------------- files
def write_safetensors(path, tensors):
    """F16 safetensors: 8-byte little-endian header length, JSON header, data."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = tensors[name].detach().to(torch.float16).contiguous().numpy()
        b = a.tobytes()
        header[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@torch.no_grad()
def eval_loss(model, tokens, window, max_chunks=None):
    """Mean NLL (nats/token) over consecutive chunks of `window` tokens: [BOS, chunk[:-1]] -> chunk."""
    model.eval()
    total, count = 0.0, 0
    chunks = [tokens[i:i + window] for i in range(0, len(tokens), window)]
    if max_chunks:
        chunks = chunks[:max_chunks]
    for ch in chunks:
        x = torch.tensor([[BOS] + ch[:-1]])
        y = torch.tensor([ch])
        logits = model(x)
        total += F.cross_entropy(logits[0], y[0], reduction="sum").item()
        count += len(ch)
    model.train()
    return total / count


@torch.no_grad()
def bucket_losses(model, tokens, window):
    """The test loss by position (1-based) in eval_loss's windows: buckets 1-256, 257-512,
    513-1,024, 1,025-2,048 as far as the window reaches."""
    model.eval()
    edges = [b for b in ((1, 256), (257, 512), (513, 1024), (1025, 2048)) if b[0] <= window]
    total, count = [0.0] * len(edges), [0] * len(edges)
    for i in range(0, len(tokens), window):
        ch = tokens[i:i + window]
        nll = F.cross_entropy(model(torch.tensor([[BOS] + ch[:-1]]))[0], torch.tensor(ch), reduction="none")
        for j, (a, b) in enumerate(edges):
            part = nll[a - 1:b]
            total[j] += part.sum().item()
            count[j] += part.numel()
    model.train()
    return [{"from": a, "to": b, "tokens": n, "loss": t / n if n else None, "ppl": math.exp(t / n) if n else None}
            for (a, b), t, n in zip(edges, total, count)]


def plot(log_rows, out_png, title):
    steps = [r["step"] for r in log_rows]
    plt.figure(figsize=(7, 4.2))
    plt.plot(steps, [r["train_loss"] for r in log_rows], lw=0.8, label="training loss (batch)")
    v = [(r["step"], r["valid_loss"]) for r in log_rows if r["valid_loss"] != ""]
    if v:
        plt.plot([s for s, _ in v], [l for _, l in v], "o-", ms=3, label="validation loss (subset)")
    plt.xlabel("step")
    plt.ylabel("cross entropy (nats / token)")
    plt.ylim(bottom=min(1.5, min(r["train_loss"] for r in log_rows)), top=min(8.0, max(r["train_loss"] for r in log_rows)))
    plt.grid(alpha=0.3)
    plt.legend()
    plt.title(title, fontsize=9)
    plt.tight_layout()
    plt.savefig(out_png, dpi=110)
    plt.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with train.txt, valid.txt, test.txt, tokenizer.model")
    ap.add_argument("--out", required=True, help="checkpoint folder to write (e.g. models/kjv-ternary)")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default hidden / 96)")
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="K/V heads, num_key_value_heads (default: --heads, multi-head attention); "
                         "must divide the heads (grouped-query attention)")
    ap.add_argument("--short-window", type=int, default=None, help="window of the first --short-steps steps")
    ap.add_argument("--short-steps", type=int, default=0)
    ap.add_argument("--log-prefix", default="", help="prefix of the files written beside OUT")
    args = ap.parse_args()
    heads = args.heads or args.hidden // 96
    if args.hidden % heads or args.hidden // heads != 96:
        print(f"train_model: --hidden {args.hidden} / --heads {heads} must give head_dim 96", file=sys.stderr)
        return 2
    kv_heads = args.kv_heads or heads
    if kv_heads < 1 or heads % kv_heads:
        print(f"train_model: --kv-heads {kv_heads} must divide the {heads} heads", file=sys.stderr)
        return 2
    if args.short_steps and (not args.short_window or args.window % args.short_window):
        print("train_model: --short-steps needs a --short-window that divides --window", file=sys.stderr)
        return 2
    if MISSING:
        print("train_model: missing Debian packages; install them with\n"
              "  apt-get install -y python3-torch libopenblas0-pthread python3-sentencepiece "
              "python3-numpy python3-matplotlib", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    tok_path = os.path.join(args.data, "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=tok_path)
    enc = {}
    for split in ("train", "valid", "test"):
        with open(os.path.join(args.data, f"{split}.txt"), encoding="utf-8") as f:
            enc[split] = sp.encode(f.read())
    print({k: len(v) for k, v in enc.items()}, "tokens", flush=True)
    train = torch.tensor(enc["train"], dtype=torch.long)

    c = {
        "architectures": ["BitnetForCausalLM"], "model_type": "llama", "torch_dtype": "float16",
        "hidden_act": "silu", "hidden_size": args.hidden, "intermediate_size": args.ffn,
        "num_hidden_layers": args.layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "vocab_size": sp.get_piece_size(),
        "max_position_embeddings": args.window, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_scaling": None, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": None,
    }
    model = Model(c)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"parameters {nparams}", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    os.makedirs(args.out, exist_ok=True)
    side = os.path.dirname(os.path.abspath(args.out))
    log_path = os.path.join(side, args.log_prefix + "train_log.csv")
    log_rows = []
    t0 = time.time()
    T = args.window
    # Validation during training: about 4,096 tokens (16 windows of 256), whatever the window.
    valid_chunks = max(1, 4096 // T)
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        Ts, B = T, args.batch
        if step < args.short_steps:
            Ts, B = args.short_window, args.batch * (T // args.short_window)
        starts = rng.integers(0, len(train) - Ts, size=B)
        y = torch.stack([train[s:s + Ts] for s in starts])
        x = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), y[:, :-1]], dim=1)
        loss = F.cross_entropy(model(x).reshape(-1, c["vocab_size"]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        row = {"step": step + 1, "train_loss": loss.item(), "valid_loss": "", "lr": lr_at(step),
               "wall_s": round(time.time() - t0, 1)}
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            row["valid_loss"] = eval_loss(model, enc["valid"], T, max_chunks=valid_chunks)
        log_rows.append(row)
        if (step + 1) % 10 == 0 or row["valid_loss"] != "":
            print(f"step {step + 1} loss {loss.item():.4f} valid {row['valid_loss']} lr {row['lr']:.2e} "
                  f"wall {row['wall_s']} s", flush=True)
    train_s = time.time() - t0

    # The saved checkpoint holds F16 latent weights: evaluate exactly those.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).float())
    valid_loss = eval_loss(model, enc["valid"], T)
    test_loss = eval_loss(model, enc["test"], T)
    test_buckets = bucket_losses(model, enc["test"], T)

    write_safetensors(os.path.join(args.out, "model.safetensors"), model.tensors())
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    shutil.copyfile(tok_path, os.path.join(args.out, "tokenizer.model"))
    with open(log_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(log_rows[0].keys()))
        w.writeheader()
        w.writerows(log_rows)
    title = (f"{os.path.basename(os.path.abspath(args.out))}: {nparams:,} parameters, {args.steps} steps x "
             f"{args.batch} x {T} tokens, seed {args.seed}; final validation loss {valid_loss:.4f}")
    plot(log_rows, os.path.join(side, args.log_prefix + "loss_curve.png"), title)
    record = {
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "seed": args.seed, "steps": args.steps, "batch": args.batch, "window": T, "lr": args.lr,
        "heads": heads, "kv_heads": kv_heads, "short_window": args.short_window, "short_steps": args.short_steps,
        "warmup": args.warmup, "parameters": nparams, "tokens": {k: len(v) for k, v in enc.items()},
        "train_wall_s": round(train_s, 1), "torch": torch.__version__, "threads": args.threads,
        "final_train_loss": log_rows[-1]["train_loss"],
        "valid_loss": valid_loss, "valid_ppl": math.exp(valid_loss),
        "test_loss": test_loss, "test_ppl": math.exp(test_loss),
        "test_buckets": test_buckets,
        "note": f"valid/test: F16 weights as saved, float lm_head, PyTorch float forward, windows of {T} "
                "tokens as bitsim eval scores them; test_buckets: the test loss by position in the window",
        "sha256": {n: sha256_file(os.path.join(args.out, n))
                   for n in ("config.json", "model.safetensors", "tokenizer.model")},
    }
    with open(os.path.join(side, args.log_prefix + "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(json.dumps(record, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
