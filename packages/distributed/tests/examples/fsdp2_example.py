"""An FSDP2 training script in the style of PyTorch's FSDP2 example (model built on the meta
device, fully_shard per block then the root, optional explicit prefetching and mixed precision,
to_empty + reset_parameters, Adam with gradient clipping, full-state checkpoints to resume
from), written for `torch` and run here with `import ember as torch`:

    python -m ember.distributed.run --nproc-per-node 2 fsdp2_example.py --folder DIR \
        [--explicit-prefetching] [--mixed-precision] [--dcp-api] [--steps N]

Every rank draws the same batch (one seed), so the gradients averaged over ranks are one
process's and rank 0 prints `LOSS <step> <loss>` equal for any world size."""
import argparse

from fsdp2_checkpoint import Checkpointer
from fsdp2_model import ModelArgs, Transformer

import ember as torch
from ember.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard


def set_modules_to_forward_prefetch(model, num_to_forward_prefetch):
    for i, layer in enumerate(model.layers):
        if i >= len(model.layers) - num_to_forward_prefetch:
            break
        layer.set_modules_to_forward_prefetch(
            [model.layers[i + j] for j in range(1, num_to_forward_prefetch + 1)])


def set_modules_to_backward_prefetch(model, num_to_backward_prefetch):
    for i, layer in enumerate(model.layers):
        if i < num_to_backward_prefetch:
            continue
        layer.set_modules_to_backward_prefetch(
            [model.layers[i - j] for j in range(1, num_to_backward_prefetch + 1)])


def main(args):
    if torch.accelerator.is_available():
        device = torch.device(f"{torch.accelerator.current_accelerator()}:0")
    else:
        device = torch.device("cpu")
    backend = torch.distributed.get_default_backend_for_device(device)
    torch.distributed.init_process_group(backend=backend, device_id=device)
    rank = torch.distributed.get_rank()

    torch.manual_seed(0)
    vocab_size, batch_size, seq_len = 32, 4, 8
    model_args = ModelArgs(n_layers=3, n_heads=2, vocab_size=vocab_size, max_seq_len=seq_len,
                           dropout_p=0)
    with torch.device("meta"):
        model = Transformer(model_args)
    fsdp_kwargs = {}
    if args.mixed_precision:
        fsdp_kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                        reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, **fsdp_kwargs)
    fully_shard(model, **fsdp_kwargs)
    assert isinstance(model, FSDPModule)
    if args.explicit_prefetching:
        set_modules_to_forward_prefetch(model, num_to_forward_prefetch=2)
        set_modules_to_backward_prefetch(model, num_to_backward_prefetch=2)

    checkpointer = Checkpointer(args.folder, dcp_api=args.dcp_api)
    if checkpointer.last is None:
        model.to_empty(device=device)
        model.reset_parameters()
    else:
        checkpointer.load_model(model)
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    if checkpointer.last is not None:
        checkpointer.load_optim(model, optim)

    start = 0 if checkpointer.last is None else args.steps * (checkpointer.last + 1)
    for step in range(start, start + args.steps):
        if args.explicit_prefetching:
            model.unshard()
        torch.manual_seed(100 + step)
        x = torch.randint(0, vocab_size, (batch_size, seq_len), device=device)
        loss = model(x).sum() / x.numel()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optim.step()
        optim.zero_grad()
        if rank == 0:
            print(f"LOSS {step} {loss.item():.6f}", flush=True)

    checkpointer.save(model, optim)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="FSDP2 example")
    parser.add_argument("--folder", default="checkpoints")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--explicit-prefetching", action="store_true", default=False)
    parser.add_argument("--mixed-precision", action="store_true", default=False)
    parser.add_argument("--dcp-api", action="store_true", default=False)
    main(parser.parse_args())
