"""Candidate tests for mha-masked-bias in PyTorch: the worked example of the statement, and shapes."""
import torch
from solution import multihead_attention


def example():
    act = {"query": torch.tensor([[[1.0, 1.0], [1.0, 1.0]]]),
           "context": torch.tensor([[[0.0, 1, 2, 1], [1, 0, 4, 4], [100, 100, 99, 99]]])}
    par = {"w_q": torch.eye(2), "w_k": torch.tensor([[1.0, 0], [0, 1], [0, 0], [0, 0]]),
           "w_v": torch.tensor([[0.0, 0], [0, 0], [1, 0], [0, 1]]), "w_o": torch.tensor([[1.0, 2], [3, -1]]),
           "b_o": torch.tensor([1.0, 2.0])}
    masks = {"key_mask": torch.tensor([[True, True, False]]), "query_mask": torch.tensor([[True, False]]),
             "attention_mask": torch.tensor([[[[True, True, True], [True, True, True]],
                                              [[False, True, True], [False, True, True]]]])}
    return act, par, masks


def test_worked_example():
    out, att = multihead_attention(*example(), heads=2)
    assert torch.allclose(out[0, 0], torch.tensor([16.462117, 4.924234]), atol=1e-5)
    assert torch.equal(out[0, 1], torch.zeros(2))


def test_shapes():
    out, att = multihead_attention(*example(), heads=2)
    assert out.shape == (1, 2, 2) and att.shape == (1, 2, 2, 3)
