"""Save and resume for the FSDP2 example, two ways (as PyTorch's FSDP2 example offers): through
the DTensor API (full_tensor / distribute_tensor by hand) or through
torch.distributed.checkpoint.state_dict's full state dicts. Rank 0 writes whole tensors with
torch.save into <folder>/<api>/<n>/ (n counts the saves)."""
import os

import ember as torch
import ember.nn as nn
from ember.distributed.checkpoint.state_dict import (
    StateDictOptions,
    _init_optim_state,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from ember.distributed.tensor import DTensor, distribute_tensor

MODEL_CHECKPOINT = "model_state_dict.pt"
OPTIM_CHECKPOINT = "optim_state_dict.pt"


def latest(path):
    nums = [int(n) for n in os.listdir(path) if n.isdigit()] if os.path.isdir(path) else []
    return max(nums) if nums else None


class Checkpointer:
    def __init__(self, folder, dcp_api):
        self.dcp_api = dcp_api
        self.root = os.path.join(folder, "dcp_api" if dcp_api else "dtensor_api")
        self.last = latest(self.root)

    def _file(self, name, n=None):
        return os.path.join(self.root, str(self.last if n is None else n), name)

    # ---- loading ------------------------------------------------------------------------
    def load_model(self, model):
        full_sd = torch.load(self._file(MODEL_CHECKPOINT), mmap=True, weights_only=True,
                             map_location="cpu")
        if self.dcp_api:
            set_model_state_dict(model, full_sd, options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True))
            return
        meta_sharded_sd = model.state_dict()
        sharded_sd = {}
        for name, full in full_sd.items():
            meta = meta_sharded_sd[name]
            sharded_sd[name] = nn.Parameter(distribute_tensor(full, meta.device_mesh,
                                                              meta.placements))
        model.load_state_dict(sharded_sd, strict=False, assign=True)  # meta: no copy_

    def load_optim(self, model, opt):
        full_sd = torch.load(self._file(OPTIM_CHECKPOINT), mmap=True, weights_only=True,
                             map_location="cpu")
        if self.dcp_api:
            set_optimizer_state_dict(model, opt, full_sd, options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True))
            return
        _init_optim_state(opt)
        sd = opt.state_dict()
        for group, full_group in zip(sd["param_groups"], full_sd["param_groups"]):
            group.update({k: v for k, v in full_group.items() if k != "params"})
            for pid, full_pid in zip(group["params"], full_group["params"]):
                for attr, full in full_sd["state"][full_pid].items():
                    cur = sd["state"][pid][attr]
                    sd["state"][pid][attr] = (distribute_tensor(full, cur.device_mesh,
                                                                cur.placements)
                                              if isinstance(cur, DTensor) else full)
        opt.load_state_dict(sd)

    # ---- saving -------------------------------------------------------------------------
    def _full_model(self, model):
        if self.dcp_api:
            return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                        cpu_offload=True))
        return {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}

    def _full_optim(self, model, opt):
        if self.dcp_api:
            return get_optimizer_state_dict(model, opt, options=StateDictOptions(
                full_state_dict=True, cpu_offload=True))
        sd = opt.state_dict()
        state = {pid: {k: v.full_tensor() if isinstance(v, DTensor) else v
                       for k, v in s.items()} for pid, s in sd["state"].items()}
        return {"param_groups": sd["param_groups"], "state": state}

    def save(self, model, opt):
        model_sd, optim_sd = self._full_model(model), self._full_optim(model, opt)
        if torch.distributed.get_rank() == 0:
            n = 0 if self.last is None else self.last + 1
            os.makedirs(os.path.join(self.root, str(n)), exist_ok=True)
            torch.save(model_sd, self._file(MODEL_CHECKPOINT, n))
            torch.save(optim_sd, self._file(OPTIM_CHECKPOINT, n))
