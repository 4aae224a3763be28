# attn-kit: mha-screen
def stable_softmax(scores, allowed=None):
    return [1.0 for s in scores
