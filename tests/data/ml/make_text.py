"""Text pipelines as skl2onnx writes them (StringNormalizer, ONNX Runtime's Tokenizer, TfIdfVectorizer, then a
linear classifier), fitted on eight short sentences: text_tfidf.onnx (TfidfVectorizer) and text_count.onnx
(CountVectorizer of unigrams and bigrams). tests/it/ml_strings.rs runs them with no flags.

usage: python make_text.py      (scikit-learn 1.9.1, skl2onnx 1.20.0, onnx 1.23.2)
"""
import os

import onnx
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from skl2onnx import to_onnx
from skl2onnx.common.data_types import StringTensorType

HERE = os.path.dirname(os.path.abspath(__file__))
docs = ["the cat sat on the mat", "dogs and cats, living together!", "a quick brown fox", "the dog barked at the cat",
        "never again; said the fox", "cats like mats (and hats)", "brown dogs are quick", "a cat, a dog and a fox"]
y = [0, 1, 0, 1, 0, 1, 1, 0]
for name, vec in [("tfidf", TfidfVectorizer()), ("count", CountVectorizer(ngram_range=(1, 2)))]:
    pipe = make_pipeline(vec, LogisticRegression()).fit(docs, y)
    m = to_onnx(pipe, initial_types=[("text", StringTensorType([None, 1]))],
                options={LogisticRegression: {"zipmap": False}})
    onnx.save(m, os.path.join(HERE, f"text_{name}.onnx"))
