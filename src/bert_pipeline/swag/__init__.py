"""SWAG multiple choice (the paper, 4.4): readers, features and fine-tuning, without Kedro."""
