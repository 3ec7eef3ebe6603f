"""Other toolkits' formats: CTranslate2 and Hugging Face exports, the Marian (OPUS-MT) import."""
