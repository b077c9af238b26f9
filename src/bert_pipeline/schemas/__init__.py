"""Pandera schemas of the tables that cross Kedro node boundaries."""
