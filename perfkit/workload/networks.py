"""Three reference networks, built from their definitions (never downloaded, no weights).

* ``resnet50``: torchvision's ResNet-50 (He et al. 2016, the "v1.5" variant torchvision ships:
  the stride of a downsampling bottleneck sits on its 3x3 convolution).  torchvision's own
  ``resnet50`` is used when torchvision imports; otherwise the local copy below, which has the
  same modules in the same order (25,557,032 parameters).
* ``bert-base``: the BERT-base encoder as Hugging Face ``transformers`` ``BertModel`` runs it
  with ``attn_implementation="eager"``: embeddings (word, position, token type, LayerNorm), 12
  layers, pooler.  109,482,240 parameters (embeddings and pooler included).
* ``gpt2``: GPT-2 small as ``transformers`` ``GPT2LMHeadModel`` (eager attention): token and
  position embeddings, 12 pre-LN blocks with ``Conv1D`` projections (``addmm``), the tanh GELU
  written out in Python ops as ``NewGELUActivation`` does, final LayerNorm, and the LM head tied
  to the token embedding (counted once: 124,439,808 parameters).

Eager attention by default: it is what the FLOP formulas count and what Ivanov et al. (MLSys
2021) profiled, and it shows the softmax, scale and mask kernels that a fused attention kernel
hides.  ``attention="sdpa"`` builds the transformers' ``sdpa`` path instead:
``F.scaled_dot_product_attention``, one fused kernel (flash or memory-efficient attention on a
GPU).  Build under ``torch.device("meta")`` to get shapes with no memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ResNet50", "Bert", "GPT2", "NETWORKS", "NetworkSpec", "resolve", "PARAMS"]

#: published parameter counts (torchvision's model table; the BERT and GPT-2 checkpoints' counts)
PARAMS = {"resnet50": 25_557_032, "bert-base": 109_482_240, "gpt2": 124_439_808}


# --- ResNet-50 (torchvision.models.resnet, layer for layer) ----------------------------------
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)  # v1.5
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, layers=(3, 4, 6, 3)):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._layer(64, layers[0])
        self.layer2 = self._layer(128, layers[1], stride=2)
        self.layer3 = self._layer(256, layers[2], stride=2)
        self.layer4 = self._layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * 4, num_classes)

    def _layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        mods = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        mods += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*mods)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50() -> nn.Module:
    """torchvision's resnet50 (no weights) when torchvision imports, else the local copy."""
    try:
        from torchvision.models import resnet50 as tv_resnet50
    except Exception:  # not installed, or a build that does not match this torch
        return ResNet50()
    return tv_resnet50(weights=None)


ATTENTION = ("eager", "sdpa")


def _sdpa(attention: str) -> bool:
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
    return attention == "sdpa"


# --- BERT-base (transformers BertModel, eager attention) -------------------------------------
@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_positions: int = 512
    type_vocab: int = 2
    dropout: float = 0.1
    eps: float = 1e-12


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig, attention: str = "eager"):
        super().__init__()
        self.h, self.dh, self.sdpa = c.heads, c.hidden // c.heads, _sdpa(attention)
        self.query, self.key, self.value = (nn.Linear(c.hidden, c.hidden) for _ in range(3))
        self.dropout = nn.Dropout(c.dropout)
        self.p = c.dropout

    def _heads(self, x):  # (B, S, H*Dh) -> (B, H, S, Dh)
        return x.view(x.shape[0], x.shape[1], self.h, self.dh).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        if self.sdpa:  # every token attends (the mask is all zeros): no mask, as transformers' sdpa path
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)
            return ctx.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.h * self.dh)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + mask
        probs = self.dropout(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(x.shape[0], x.shape[1], self.h * self.dh)


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig, attention: str = "eager"):
        super().__init__()
        self.attention = BertSelfAttention(c, attention)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.intermediate = nn.Linear(c.hidden, c.intermediate)
        self.output = nn.Linear(c.intermediate, c.hidden)
        self.out_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x, mask):
        a = self.attn_norm(self.dropout(self.attn_out(self.attention(x, mask))) + x)
        h = F.gelu(self.intermediate(a))  # BERT's exact (erf) GELU
        return self.out_norm(self.dropout(self.output(h)) + a)


class Bert(nn.Module):
    """BERT-base encoder with embeddings and pooler; ``forward(input_ids)`` -> (sequence, pooled)."""

    def __init__(self, c: BertConfig = BertConfig(), attention: str = "eager"):
        super().__init__()
        self.config = c
        self.word = nn.Embedding(c.vocab_size, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.emb_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(BertLayer(c, attention) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden)

    def forward(self, input_ids):
        b, s = input_ids.shape
        dev = input_ids.device
        pos = torch.arange(s, device=dev).unsqueeze(0)
        types = torch.zeros_like(input_ids)
        x = self.dropout(self.emb_norm(self.word(input_ids) + self.token_type(types) + self.position(pos)))
        # extended attention mask (all tokens attend): (1 - mask) * finfo.min, (B, 1, 1, S)
        ones = torch.ones(b, s, device=dev, dtype=x.dtype)
        mask = (1.0 - ones[:, None, None, :]) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


# --- GPT-2 small (transformers GPT2LMHeadModel, eager attention) -----------------------------
@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    d: int = 768
    layers: int = 12
    heads: int = 12
    dropout: float = 0.1
    eps: float = 1e-5


class Conv1D(nn.Module):
    """GPT-2's projection: ``x @ W + b`` with W stored (in, out), run as one addmm."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(shape)


def new_gelu(x):
    """transformers' NewGELUActivation, op for op (each a kernel in eager mode)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, c: GPT2Config, attention: str = "eager"):
        super().__init__()
        self.h, self.dh, self.d, self.sdpa, self.p = c.heads, c.d // c.heads, c.d, _sdpa(attention), c.dropout
        n = c.n_positions
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n),
                             persistent=False)
        self.c_attn = Conv1D(3 * c.d, c.d)
        self.c_proj = Conv1D(c.d, c.d)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        q, k, v = (t.view(b, s, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
            return self.resid_dropout(self.c_proj(out.transpose(1, 2).contiguous().view(b, s, self.d)))
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        causal = self.bias[:, :, :s, :s]
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device))
        w = self.attn_dropout(F.softmax(w, dim=-1).type(v.dtype))
        out = torch.matmul(w, v).transpose(1, 2).contiguous().view(b, s, self.d)
        return self.resid_dropout(self.c_proj(out))


class GPT2Block(nn.Module):
    def __init__(self, c: GPT2Config, attention: str = "eager"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.d, eps=c.eps)
        self.attn = GPT2Attention(c, attention)
        self.ln_2 = nn.LayerNorm(c.d, eps=c.eps)
        self.c_fc = Conv1D(4 * c.d, c.d)
        self.c_proj = Conv1D(c.d, 4 * c.d)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(new_gelu(self.c_fc(self.ln_2(x)))))


class GPT2(nn.Module):
    """GPT-2 small with its tied LM head; ``forward(input_ids)`` -> logits (B, S, vocab)."""

    def __init__(self, c: GPT2Config = GPT2Config(), attention: str = "eager"):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.d)
        self.wpe = nn.Embedding(c.n_positions, c.d)
        self.drop = nn.Dropout(c.dropout)
        self.h = nn.ModuleList(GPT2Block(c, attention) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.d, eps=c.eps)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # LM head tied to wte


# --- the registry: how to build each network, its inputs and its training loss ---------------
@dataclass(frozen=True)
class NetworkSpec:
    name: str
    build: Callable[[], nn.Module]
    kind: str                  # "image" or "tokens"
    default_batch: int
    default_seq: int | None    # None: takes no sequence length
    max_seq: int | None
    description: str

    def inputs(self, batch: int, seq: int | None, device="meta", dtype=torch.float32) -> dict:
        """The model's input and the training target."""
        if self.kind == "image":
            return {"x": torch.randn(batch, 3, 224, 224, device=device, dtype=dtype),
                    "target": torch.randint(0, 1000, (batch,), device=device)}
        ids = torch.randint(0, 1000, (batch, seq), device=device)
        return {"x": ids, "target": torch.randint(0, 1000, (batch, seq), device=device)}

    def loss(self, out, target):
        """The training step's loss: cross-entropy for ResNet-50 (1000 classes) and GPT-2 (next
        token over the vocabulary, logits upcast to float32 as transformers does); for the BERT
        encoder, which has no head here, the mean of its outputs (a cheap stand-in)."""
        if self.name == "resnet50":
            return F.cross_entropy(out, target)
        if self.name == "gpt2":
            return F.cross_entropy(out.float().view(-1, out.shape[-1]), target.view(-1))
        seq, pooled = out
        return seq.float().mean() + pooled.float().mean()


NETWORKS: dict[str, NetworkSpec] = {
    "resnet50": NetworkSpec("resnet50", resnet50, "image", 32, None, None,
                            "ResNet-50 v1.5 (torchvision), 224x224 images"),
    "bert-base": NetworkSpec("bert-base", Bert, "tokens", 8, 128, 512,
                             "BERT-base encoder (12 layers, d=768, eager attention) with pooler"),
    "gpt2": NetworkSpec("gpt2", GPT2, "tokens", 8, 1024, 1024,
                        "GPT-2 small (12 layers, d=768, eager attention) with its tied LM head"),
}
_ALIASES = {"resnet-50": "resnet50", "r50": "resnet50", "bert": "bert-base", "bert_base": "bert-base",
            "bertbase": "bert-base", "gpt2-small": "gpt2", "gpt-2": "gpt2", "gpt2small": "gpt2"}


def resolve(name: str) -> NetworkSpec:
    key = str(name).lower()
    key = _ALIASES.get(key, key)
    if key not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}")
    return NETWORKS[key]
