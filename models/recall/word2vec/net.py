"""Skip-gram with negative sampling as PaddleRec's models/recall/word2vec/net.py, ported by its
imports: an input embedding for the centre word, an output embedding and a bias for the words
it is scored against."""

import fleet as paddle


class Word2VecLayer(paddle.nn.Layer):
    def __init__(self, sparse_feature_number, emb_dim, neg_num, emb_name, emb_w_name, emb_b_name):
        super().__init__()
        self.sparse_feature_number = sparse_feature_number
        self.emb_dim = emb_dim
        self.neg_num = neg_num
        init_width = 0.5 / self.emb_dim
        self.embedding = paddle.nn.Embedding(
            self.sparse_feature_number,
            self.emb_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name=emb_name, initializer=paddle.nn.initializer.Uniform(-init_width, init_width)
            ),
        )
        self.embedding_w = paddle.nn.Embedding(
            self.sparse_feature_number,
            self.emb_dim,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name=emb_w_name, initializer=paddle.nn.initializer.Constant(value=0.0)
            ),
        )
        self.embedding_b = paddle.nn.Embedding(
            self.sparse_feature_number,
            1,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name=emb_b_name, initializer=paddle.nn.initializer.Constant(value=0.0)
            ),
        )

    def forward(self, inputs):
        input_emb = self.embedding(inputs[0])
        true_emb_w = self.embedding_w(inputs[1])
        true_emb_b = self.embedding_b(inputs[1])
        input_emb = paddle.squeeze(x=input_emb, axis=[1])
        true_emb_w = paddle.squeeze(x=true_emb_w, axis=[1])
        true_emb_b = paddle.squeeze(x=true_emb_b, axis=[1])

        neg_emb_w = self.embedding_w(inputs[2])
        neg_emb_b = self.embedding_b(inputs[2])
        neg_emb_b_vec = paddle.reshape(neg_emb_b, shape=[-1, self.neg_num])

        true_logits = paddle.add(
            paddle.sum(paddle.multiply(input_emb, true_emb_w), axis=1, keepdim=True), true_emb_b
        )
        input_emb_re = paddle.reshape(input_emb, shape=[-1, 1, self.emb_dim])
        neg_matmul = paddle.matmul(input_emb_re, neg_emb_w, transpose_y=True)
        neg_matmul_re = paddle.reshape(neg_matmul, shape=[-1, self.neg_num])
        neg_logits = paddle.add(neg_matmul_re, neg_emb_b_vec)
        return true_logits, neg_logits
